//! Where an extension's overlay goes: pi-tui's `OverlayOptions` (`width` in columns or `"50%"`,
//! `minWidth`, `maxHeight`, `anchor`, `offsetX`/`offsetY`, `row`/`col` in cells or `"25%"`,
//! `margin` as a number or per side), resolved the way pi-tui resolves them: the width first
//! (default: 80 columns or what the margins leave), then the row and column for the rendered
//! height, kept inside the screen's margins.

use ratatui::layout::Rect;
use serde_json::Value;

/// An overlay's options, as the extension gave them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Placement {
    width: Option<Size>,
    min_width: Option<u16>,
    max_height: Option<Size>,
    anchor: Anchor,
    offset: (i32, i32),
    row: Option<Size>,
    col: Option<Size>,
    /// Top, right, bottom, left.
    margin: [u16; 4],
}

/// Cells, or a percentage of the screen.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Size {
    Cells(u16),
    Percent(f64),
}

impl Size {
    fn parse(value: Option<&Value>) -> Option<Size> {
        match value? {
            Value::Number(n) => n.as_u64().map(|n| Size::Cells(n.min(u64::from(u16::MAX)) as u16)),
            Value::String(s) => s.strip_suffix('%')?.parse::<f64>().ok().filter(|p| *p >= 0.0).map(Size::Percent),
            _ => None,
        }
    }

    /// As cells of `reference` (pi-tui's `parseSizeValue`).
    fn of(self, reference: u16) -> u16 {
        match self {
            Size::Cells(n) => n,
            Size::Percent(p) => (f64::from(reference) * p / 100.0).floor() as u16,
        }
    }
}

/// One of pi-tui's nine anchors.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum Anchor {
    TopLeft,
    TopCenter,
    TopRight,
    LeftCenter,
    #[default]
    Center,
    RightCenter,
    BottomLeft,
    BottomCenter,
    BottomRight,
}

impl Anchor {
    fn parse(name: &str) -> Anchor {
        match name {
            "top-left" => Anchor::TopLeft,
            "top-center" => Anchor::TopCenter,
            "top-right" => Anchor::TopRight,
            "left-center" => Anchor::LeftCenter,
            "right-center" => Anchor::RightCenter,
            "bottom-left" => Anchor::BottomLeft,
            "bottom-center" => Anchor::BottomCenter,
            "bottom-right" => Anchor::BottomRight,
            _ => Anchor::Center,
        }
    }

    /// Where along an axis of `avail` cells (after `start`) something of `size` goes: 0 start,
    /// 1 middle, 2 end.
    fn place(at: u8, size: u16, avail: u16, start: u16) -> i32 {
        let free = i32::from(avail) - i32::from(size);
        i32::from(start)
            + match at {
                0 => 0,
                1 => free.div_euclid(2),
                _ => free,
            }
    }

    fn vertical(self) -> u8 {
        match self {
            Anchor::TopLeft | Anchor::TopCenter | Anchor::TopRight => 0,
            Anchor::LeftCenter | Anchor::Center | Anchor::RightCenter => 1,
            _ => 2,
        }
    }

    fn horizontal(self) -> u8 {
        match self {
            Anchor::TopLeft | Anchor::LeftCenter | Anchor::BottomLeft => 0,
            Anchor::TopCenter | Anchor::Center | Anchor::BottomCenter => 1,
            _ => 2,
        }
    }
}

impl Placement {
    /// The options of a `custom` request (`overlayOptions`).
    pub fn parse(options: &Value) -> Placement {
        let int = |key: &str| options.get(key).and_then(Value::as_i64).map(|n| n.clamp(-10_000, 10_000) as i32);
        let side = |n: Option<&Value>| n.and_then(Value::as_u64).map_or(0, |n| n.min(1000) as u16);
        let margin = match options.get("margin") {
            Some(all @ Value::Number(_)) => [side(Some(all)); 4],
            Some(sides) => ["top", "right", "bottom", "left"].map(|s| side(sides.get(s))),
            None => [0; 4],
        };
        Placement {
            width: Size::parse(options.get("width")),
            min_width: options.get("minWidth").and_then(Value::as_u64).map(|n| n.min(1000) as u16),
            max_height: Size::parse(options.get("maxHeight")),
            anchor: options.get("anchor").and_then(Value::as_str).map(Anchor::parse).unwrap_or_default(),
            offset: (int("offsetX").unwrap_or(0), int("offsetY").unwrap_or(0)),
            row: Size::parse(options.get("row")),
            col: Size::parse(options.get("col")),
            margin,
        }
    }

    fn avail(&self, screen: Rect) -> (u16, u16) {
        let [top, right, bottom, left] = self.margin;
        (screen.width.saturating_sub(left + right).max(1), screen.height.saturating_sub(top + bottom).max(1))
    }

    /// The width the component renders for on `screen`.
    pub fn width(&self, screen: Rect) -> u16 {
        let (avail_width, _) = self.avail(screen);
        let width = self.width.map_or(avail_width.min(80), |w| w.of(screen.width));
        width.max(self.min_width.unwrap_or(0)).clamp(1, avail_width)
    }

    /// Where a component of `lines` rendered lines goes on `screen` (its height cut to
    /// `maxHeight`).
    pub fn rect(&self, screen: Rect, lines: usize) -> Rect {
        let [top, right, bottom, left] = self.margin;
        let (avail_width, avail_height) = self.avail(screen);
        let width = self.width(screen);
        let max_height = self.max_height.map(|m| m.of(screen.height).clamp(1, avail_height));
        let height = (lines.min(usize::from(u16::MAX)) as u16).min(max_height.unwrap_or(u16::MAX)).min(screen.height);
        let along = |size: Option<Size>, at: u8, extent: u16, avail: u16, start: u16| match size {
            Some(Size::Percent(p)) => {
                i32::from(start) + (f64::from(avail.saturating_sub(extent)) * p / 100.0).floor() as i32
            }
            Some(Size::Cells(n)) => i32::from(n),
            None => Anchor::place(at, extent, avail, start),
        };
        let row = along(self.row, self.anchor.vertical(), height, avail_height, top) + self.offset.1;
        let col = along(self.col, self.anchor.horizontal(), width, avail_width, left) + self.offset.0;
        let clamp = |at: i32, low: u16, high: i32| at.min(high).max(i32::from(low)) as u16;
        let row = clamp(row, top, i32::from(screen.height) - i32::from(bottom) - i32::from(height));
        let col = clamp(col, left, i32::from(screen.width) - i32::from(right) - i32::from(width));
        Rect::new(screen.x + col, screen.y + row, width.min(screen.width - col), height.min(screen.height - row))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const SCREEN: Rect = Rect { x: 0, y: 0, width: 100, height: 30 };

    fn rect(options: serde_json::Value, lines: usize) -> (u16, u16, u16, u16) {
        let r = Placement::parse(&options).rect(SCREEN, lines);
        (r.x, r.y, r.width, r.height)
    }

    #[test]
    fn overlays_go_where_pi_tui_puts_them() {
        // Default: 80 columns, centred.
        assert_eq!(rect(json!({}), 10), (10, 10, 80, 10));
        assert_eq!(rect(json!({"anchor": "top-left", "width": 40}), 5), (0, 0, 40, 5));
        assert_eq!(rect(json!({"anchor": "bottom-right", "width": 40}), 5), (60, 25, 40, 5));
        assert_eq!(rect(json!({"anchor": "right-center", "width": 40, "margin": {"right": 2}}), 6), (58, 12, 40, 6));
        assert_eq!(rect(json!({"width": "50%", "maxHeight": "20%"}), 40), (25, 12, 50, 6));
        assert_eq!(rect(json!({"anchor": "center", "width": 50, "offsetX": 8, "offsetY": 4}), 10), (33, 14, 50, 10));
        assert_eq!(rect(json!({"row": "0%", "col": "100%", "width": 20}), 3), (80, 0, 20, 3));
        assert_eq!(rect(json!({"row": 2, "col": 3, "width": 10, "margin": 1}), 3), (3, 2, 10, 3));
        // Kept on the screen: too wide, pushed past an edge.
        assert_eq!(rect(json!({"width": 500}), 3), (0, 13, 100, 3));
        assert_eq!(rect(json!({"width": 30, "offsetX": -90}), 3), (0, 13, 30, 3));
        assert_eq!(Placement::parse(&json!({"width": 10, "minWidth": 30})).width(SCREEN), 30);
    }
}
