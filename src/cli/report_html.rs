//! `pi report --format html`: one self-contained page a manager opens — no scripts, no fonts,
//! nothing fetched at view time. Cost per day stacked by org as an inline SVG chart, cost by
//! org, user and model as bar tables, the most expensive sessions, and the unpriced-model
//! footnote. Every name is escaped (they come from files).

use std::collections::BTreeMap;
use std::fmt::Write;

use super::report_data::{Groups, Sums, Unpriced, unpriced_note};

/// The page for `groups` keyed `[day, org, user, model]`, per-session totals, the unpriced
/// models and the date range asked for.
pub fn page(
    groups: &Groups,
    sessions: &[(String, Sums)],
    unpriced: &Unpriced,
    range: (Option<&str>, Option<&str>),
) -> String {
    let total = sum(groups.values());
    let mut html = String::from(HEAD);
    let span = match range {
        (None, None) => "all sessions".to_owned(),
        (since, until) => format!("{} to {}", since.unwrap_or("the start"), until.unwrap_or("today")),
    };
    let _ = write!(
        html,
        "<h1>pi cost report</h1><p class=sub>{} · {} · cost {} · {} tokens · {} turns</p>",
        escape(&span),
        escape(&pi_agent::time::iso8601(pi_agent::time::now_millis())[..16].replace('T', " ")),
        money(&total),
        total.usage.total_tokens,
        total.turns
    );
    html.push_str(&chart(groups));
    for (title, at) in [("By organization", 1), ("By user", 2), ("By model", 3)] {
        html.push_str(&bars(title, &by(groups, at)));
    }
    html.push_str(&top_sessions(sessions));
    if !unpriced.is_empty() {
        let _ = write!(html, "<p class=note>{}</p>", escape(&unpriced_note(unpriced)));
    }
    html.push_str("<p class=sub>Costs are estimates from each model's price per million tokens.</p></body></html>\n");
    html
}

const HEAD: &str = "<!doctype html><html lang=en><head><meta charset=utf-8><title>pi cost report</title>\
<style>body{font:14px system-ui,sans-serif;margin:2em auto;max-width:960px;color:#222}h1{margin:0}\
h2{margin-top:2em;font-size:16px}.sub{color:#666}table{border-collapse:collapse;width:100%}\
td,th{padding:3px 8px;text-align:left;border-bottom:1px solid #eee}td.n{text-align:right;font-variant-numeric:tabular-nums}\
.bar{background:#4e79a7;height:10px}.note{background:#fff4e5;padding:8px}svg text{font-size:10px;fill:#444}</style></head><body>";

const PALETTE: [&str; 8] = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#9c755f"];

fn sum<'a>(sums: impl Iterator<Item = &'a Sums>) -> Sums {
    let mut total = Sums::default();
    for s in sums {
        total.usage.add(&s.usage);
        total.turns += s.turns;
    }
    total
}

/// Totals by the key at position `at` (`1` org, `2` user, `3` model), most expensive first.
fn by(groups: &Groups, at: usize) -> Vec<(String, Sums)> {
    let mut totals: BTreeMap<&str, Sums> = BTreeMap::new();
    for (key, sums) in groups {
        let entry = totals.entry(key.get(at).map_or("-", String::as_str)).or_default();
        entry.usage.add(&sums.usage);
        entry.turns += sums.turns;
    }
    let mut rows: Vec<(String, Sums)> = totals.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
    rows.sort_by(|a, b| b.1.usage.cost.total.total_cmp(&a.1.usage.cost.total).then_with(|| a.0.cmp(&b.0)));
    rows
}

/// `$0.001234`, or `n/a` when some of it has no price.
fn money(sums: &Sums) -> String {
    if sums.usage.cost.unknown { "n/a".into() } else { format!("${:.6}", sums.usage.cost.total) }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;").replace('\'', "&#39;")
}

/// A table with a bar per row, as wide as the row's share of the most expensive one.
fn bars(title: &str, rows: &[(String, Sums)]) -> String {
    let top = rows.first().map_or(0.0, |(_, s)| s.usage.cost.total).max(f64::MIN_POSITIVE);
    let mut html = format!(
        "<h2>{}</h2><table><tr><th>name</th><th></th><th>cost</th><th>tokens</th><th>turns</th></tr>",
        escape(title)
    );
    for (name, sums) in rows {
        let width = (sums.usage.cost.total / top * 100.0).clamp(0.0, 100.0);
        let _ = write!(
            html,
            "<tr><td>{}</td><td style=width:40%><div class=bar style=width:{width:.1}%></div></td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td></tr>",
            escape(name),
            money(sums),
            sums.usage.total_tokens,
            sums.turns
        );
    }
    html.push_str("</table>");
    html
}

/// Cost per day, stacked by org, as an SVG bar chart.
fn chart(groups: &Groups) -> String {
    let mut days: BTreeMap<&str, BTreeMap<&str, f64>> = BTreeMap::new();
    let mut orgs: Vec<&str> = Vec::new();
    for (key, sums) in groups {
        let (day, org) = (key.first().map_or("-", String::as_str), key.get(1).map_or("-", String::as_str));
        *days.entry(day).or_default().entry(org).or_default() += sums.usage.cost.total;
        if !orgs.contains(&org) {
            orgs.push(org);
        }
    }
    if days.is_empty() {
        return "<p class=sub>No usage in this range.</p>".into();
    }
    let (width, height, left, bottom) = (900.0, 220.0, 60.0, 30.0);
    let top = days.values().map(|o| o.values().sum::<f64>()).fold(0.0, f64::max).max(f64::MIN_POSITIVE);
    let step = (width - left) / days.len() as f64;
    let mut svg = format!(
        "<h2>Cost per day by organization</h2><svg viewBox=\"0 0 {width} {h}\" width=100% role=img aria-label=\"cost per day\">",
        h = height + bottom
    );
    let _ = write!(svg, "<text x=0 y=10>${top:.4}</text><text x=0 y={height}>$0</text>");
    for (i, (day, by_org)) in days.iter().enumerate() {
        let x = left + i as f64 * step;
        let mut y = height;
        for (org, cost) in by_org {
            let h = cost / top * (height - 10.0);
            y -= h;
            let color = PALETTE[orgs.iter().position(|o| o == org).unwrap_or(0) % PALETTE.len()];
            let _ = write!(
                svg,
                "<rect x={x:.1} y={y:.1} width={w:.1} height={h:.1} fill=\"{color}\"><title>{} {}: ${cost:.6}</title></rect>",
                escape(day),
                escape(org),
                w = (step * 0.8).max(1.0)
            );
        }
        if days.len() <= 31 || i % (days.len() / 15 + 1) == 0 {
            let _ = write!(svg, "<text x={x:.1} y={}>{}</text>", height + 14.0, escape(day.get(5..).unwrap_or(day)));
        }
    }
    svg.push_str("</svg><p class=sub>");
    for (i, org) in orgs.iter().enumerate() {
        let _ = write!(svg, "<span style=color:{}>■</span> {} &nbsp; ", PALETTE[i % PALETTE.len()], escape(org));
    }
    svg.push_str("</p>");
    svg
}

/// The ten most expensive sessions.
fn top_sessions(sessions: &[(String, Sums)]) -> String {
    let mut sorted: Vec<&(String, Sums)> = sessions.iter().collect();
    sorted.sort_by(|a, b| b.1.usage.cost.total.total_cmp(&a.1.usage.cost.total));
    let mut html = String::from(
        "<h2>Top sessions</h2><table><tr><th>session file</th><th>cost</th><th>tokens</th><th>turns</th></tr>",
    );
    for (file, sums) in sorted.into_iter().take(10) {
        let name = std::path::Path::new(file).file_name().map_or(file.clone(), |n| n.to_string_lossy().into_owned());
        let _ = write!(
            html,
            "<tr><td title=\"{}\">{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td></tr>",
            escape(file),
            escape(&name),
            money(sums),
            sums.usage.total_tokens,
            sums.turns
        );
    }
    html.push_str("</table>");
    html
}
