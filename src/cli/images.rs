//! Images attached to a prompt (upstream's `ImageContent`: base64 data and a MIME type): from
//! RPC's `images`, and from `@FILE` arguments. PNG, JPEG, GIF and WebP, as upstream reads them.

use base64::Engine as _;
use pi_agent::message::ContentBlock;
use serde_json::Value;

/// The MIME type of an image pi can attach, by its first bytes.
pub fn image_type(bytes: &[u8]) -> Option<&'static str> {
    match bytes {
        [0x89, b'P', b'N', b'G', ..] => Some("image/png"),
        [0xFF, 0xD8, 0xFF, ..] => Some("image/jpeg"),
        [b'G', b'I', b'F', b'8', ..] => Some("image/gif"),
        [b'R', b'I', b'F', b'F', _, _, _, _, b'W', b'E', b'B', b'P', ..] => Some("image/webp"),
        _ => None,
    }
}

/// A file's bytes as an image block, when they are one of the images pi attaches.
pub fn from_bytes(bytes: &[u8]) -> Option<ContentBlock> {
    let mime_type = image_type(bytes)?;
    let data = base64::engine::general_purpose::STANDARD.encode(bytes);
    Some(ContentBlock::Image { data, mime_type: mime_type.to_owned() })
}

/// RPC's `images` (`[{"type": "image", "data": BASE64, "mimeType": "image/png"}]`) as image
/// blocks; the first one that is not such an image is named in the error.
pub fn from_rpc(values: &[Value]) -> Result<Vec<ContentBlock>, String> {
    values
        .iter()
        .enumerate()
        .map(|(i, value)| {
            let field = |name: &str| value.get(name).and_then(Value::as_str);
            if field("type") != Some("image") {
                return Err(format!("images[{i}]: not {{\"type\": \"image\", \"data\", \"mimeType\"}}"));
            }
            let (Some(data), Some(mime)) = (field("data"), field("mimeType")) else {
                return Err(format!("images[{i}]: needs \"data\" (base64) and \"mimeType\""));
            };
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(data)
                .map_err(|_| format!("images[{i}]: \"data\" is not base64"))?;
            match image_type(&bytes) {
                Some(found) if found == mime => {
                    Ok(ContentBlock::Image { data: data.to_owned(), mime_type: mime.to_owned() })
                }
                Some(found) => Err(format!("images[{i}]: the data is {found}, not {mime}")),
                None => Err(format!("images[{i}]: not a PNG, JPEG, GIF or WebP image")),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";

    #[test]
    fn rpc_images_are_checked_and_kept_as_sent() {
        let data = base64::engine::general_purpose::STANDARD.encode(PNG);
        let good = json!({"type": "image", "data": data, "mimeType": "image/png"});
        assert_eq!(
            from_rpc(std::slice::from_ref(&good)).unwrap(),
            [ContentBlock::Image { data: data.clone(), mime_type: "image/png".into() }]
        );
        for (bad, says) in [
            (json!({"type": "text", "text": "x"}), "images[0]: not"),
            (json!({"type": "image", "data": "!!", "mimeType": "image/png"}), "not base64"),
            (json!({"type": "image", "data": data, "mimeType": "image/jpeg"}), "is image/png, not image/jpeg"),
            (json!({"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"}), "not a PNG"),
        ] {
            let e = from_rpc(&[bad]).unwrap_err();
            assert!(e.contains(says), "{e}");
        }
    }
}
