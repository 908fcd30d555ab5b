//! One short answer per provider API, in each API's own wire format, with the flags and the
//! variables a user of that provider has: what `pi -p` is run with against a loopback replay.

/// One API's replay.
pub struct Replay {
    /// The API.
    pub api: &'static str,
    /// The response's content type.
    pub content_type: &'static str,
    /// The streamed answer: "Hello from <provider>", 20 input tokens (some cached where the
    /// API reports it), 5 output tokens.
    pub body: Vec<u8>,
    /// `pi` flags; `{base}` is the server's address.
    pub args: &'static [&'static str],
    /// Variables; `{base}` is the server's address.
    pub env: &'static [(&'static str, &'static str)],
    /// What the answer says.
    pub answer: &'static str,
    /// What the request must carry: its request line's start and its credential.
    pub sent: &'static [&'static str],
}

fn sse(events: &[(&str, &str)]) -> Vec<u8> {
    events
        .iter()
        .map(
            |(name, data)| {
                if name.is_empty() { format!("data: {data}\n\n") } else { format!("event: {name}\ndata: {data}\n\n") }
            },
        )
        .collect::<String>()
        .into_bytes()
}

/// Every API pi speaks over HTTP.
pub fn api_replays() -> Vec<Replay> {
    vec![
        Replay {
            api: "openai-responses",
            content_type: "text/event-stream",
            body: sse(&[
                ("response.created", r#"{"type":"response.created","response":{"id":"r1","status":"in_progress","model":"gpt-5-mini"}}"#),
                ("response.output_item.added", r#"{"type":"response.output_item.added","output_index":0,"item":{"id":"msg_1","type":"message","status":"in_progress","content":[],"role":"assistant"}}"#),
                ("response.output_text.delta", r#"{"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hello from Responses"}"#),
                ("response.output_item.done", r#"{"type":"response.output_item.done","output_index":0,"item":{"id":"msg_1","type":"message","status":"completed","content":[{"type":"output_text","annotations":[],"text":"Hello from Responses"}],"role":"assistant"}}"#),
                ("response.completed", r#"{"type":"response.completed","response":{"id":"r1","status":"completed","model":"gpt-5-mini","usage":{"input_tokens":20,"input_tokens_details":{"cached_tokens":8},"output_tokens":5,"total_tokens":25}}}"#),
            ]),
            args: &["--provider", "openai", "--model", "gpt-5-mini", "--base-url", "{base}/v1"],
            env: &[("OPENAI_API_KEY", "sk-openai-test-1234567890")],
            answer: "Hello from Responses",
            sent: &["POST /v1/responses ", "authorization: Bearer sk-openai-test-1234567890"],
        },
        Replay {
            api: "azure-openai-responses",
            content_type: "text/event-stream",
            body: sse(&[
                ("response.output_item.added", r#"{"type":"response.output_item.added","output_index":0,"item":{"id":"msg_1","type":"message","status":"in_progress","content":[],"role":"assistant"}}"#),
                ("response.output_text.delta", r#"{"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hello from Azure"}"#),
                ("response.completed", r#"{"type":"response.completed","response":{"id":"r1","status":"completed","model":"gpt-5-mini","usage":{"input_tokens":20,"input_tokens_details":{"cached_tokens":8},"output_tokens":5,"total_tokens":25}}}"#),
            ]),
            args: &["--provider", "azure-openai-responses", "--model", "gpt-5-mini"],
            env: &[
                ("AZURE_OPENAI_API_KEY", "azure-key-1234567890"),
                ("AZURE_OPENAI_BASE_URL", "{base}/openai/v1"),
                ("AZURE_OPENAI_DEPLOYMENT_NAME_MAP", "gpt-5-mini=my-mini"),
            ],
            answer: "Hello from Azure",
            sent: &["POST /openai/v1/responses?api-version=v1 ", "api-key: azure-key-1234567890", "\"model\":\"my-mini\""],
        },
        Replay {
            api: "anthropic-messages",
            content_type: "text/event-stream",
            body: sse(&[
                ("message_start", r#"{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[],"stop_reason":null,"usage":{"input_tokens":12,"cache_creation_input_tokens":0,"cache_read_input_tokens":8,"output_tokens":1}}}"#),
                ("content_block_start", r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#),
                ("content_block_delta", r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello from Anthropic"}}"#),
                ("content_block_stop", r#"{"type":"content_block_stop","index":0}"#),
                ("message_delta", r#"{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":5}}"#),
                ("message_stop", r#"{"type":"message_stop"}"#),
            ]),
            args: &["--provider", "anthropic", "--model", "claude-sonnet-4-5", "--base-url", "{base}"],
            env: &[("ANTHROPIC_API_KEY", "sk-ant-test-1234567890")],
            answer: "Hello from Anthropic",
            sent: &["POST /v1/messages ", "x-api-key: sk-ant-test-1234567890"],
        },
        Replay {
            api: "google-generative-ai",
            content_type: "text/event-stream",
            body: sse(&[("", r#"{"candidates":[{"content":{"parts":[{"text":"Hello from Gemini"}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":20,"candidatesTokenCount":5,"totalTokenCount":25,"cachedContentTokenCount":8},"modelVersion":"gemini-2.5-flash"}"#)]),
            args: &["--provider", "google", "--model", "gemini-2.5-flash", "--base-url", "{base}/v1beta"],
            env: &[("GEMINI_API_KEY", "gemini-key-1234567890")],
            answer: "Hello from Gemini",
            sent: &["POST /v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse ", "x-goog-api-key: gemini-key-1234567890"],
        },
        Replay {
            api: "bedrock-converse-stream",
            content_type: "application/vnd.amazon.eventstream",
            body: [
                super::aws_event("messageStart", r#"{"role":"assistant"}"#),
                super::aws_event("contentBlockDelta", r#"{"contentBlockIndex":0,"delta":{"text":"Hello from Bedrock"}}"#),
                super::aws_event("messageStop", r#"{"stopReason":"end_turn"}"#),
                super::aws_event("metadata", r#"{"usage":{"inputTokens":12,"outputTokens":5,"cacheReadInputTokens":8,"totalTokens":25},"metrics":{"latencyMs":100}}"#),
            ]
            .concat(),
            args: &["--provider", "amazon-bedrock", "--model", "amazon.nova-pro-v1:0"],
            env: &[
                ("AWS_ENDPOINT_URL", "{base}"),
                ("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE"),
                ("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"),
                ("AWS_REGION", "eu-central-1"),
            ],
            answer: "Hello from Bedrock",
            sent: &["POST /model/amazon.nova-pro-v1%3A0/converse-stream ", "Credential=AKIDEXAMPLE/", "/eu-central-1/bedrock/aws4_request"],
        },
        Replay {
            api: "mistral-conversations",
            content_type: "text/event-stream",
            body: sse(&[
                ("", r#"{"id":"c1","object":"chat.completion.chunk","model":"devstral-medium-2507","choices":[{"index":0,"delta":{"role":"assistant","content":"Hello from Mistral"},"finish_reason":"stop"}],"usage":{"prompt_tokens":20,"total_tokens":25,"completion_tokens":5}}"#),
                ("", "[DONE]"),
            ]),
            args: &["--provider", "mistral", "--base-url", "{base}"],
            env: &[("MISTRAL_API_KEY", "mistral-key-1234567890")],
            answer: "Hello from Mistral",
            sent: &["POST /v1/chat/completions ", "authorization: Bearer mistral-key-1234567890", "\"model\":\"devstral-medium-latest\""],
        },
        Replay {
            api: "openai-completions",
            content_type: "text/event-stream",
            body: sse(&[
                ("", r#"{"id":"gen-1","model":"openai/gpt-5.1-codex","choices":[{"index":0,"delta":{"content":"Hello from OpenRouter"},"finish_reason":"stop"}]}"#),
                ("", r#"{"id":"gen-1","model":"openai/gpt-5.1-codex","choices":[],"usage":{"prompt_tokens":20,"completion_tokens":5,"total_tokens":25,"prompt_tokens_details":{"cached_tokens":8}}}"#),
                ("", "[DONE]"),
            ]),
            args: &["--provider", "openrouter", "--base-url", "{base}/api/v1"],
            env: &[("OPENROUTER_API_KEY", "or-key-1234567890"), ("OPENAI_API_KEY", "sk-must-not-leak-1234567890")],
            answer: "Hello from OpenRouter",
            sent: &["POST /api/v1/chat/completions ", "authorization: Bearer or-key-1234567890"],
        },
    ]
}

impl Replay {
    /// `pi -p hi --tools none` with this replay's flags and variables against a server
    /// replaying its answer, plus `extra` flags; returns the command's output and the request
    /// the server received.
    pub fn run(&self, extra: &[&std::ffi::OsStr]) -> (std::process::Output, String) {
        let (base, server) = super::one_shot_server(self.content_type, self.body.clone());
        let mut cmd = super::pi();
        cmd.args(["-p", "hi", "--tools", "none"]);
        cmd.args(self.args.iter().map(|a| a.replace("{base}", &base)));
        cmd.args(extra);
        for (name, value) in self.env {
            cmd.env(name, value.replace("{base}", &base));
        }
        let out = cmd.output().unwrap();
        let request = if out.status.success() { server.join().unwrap() } else { String::new() };
        (out, request)
    }
}
