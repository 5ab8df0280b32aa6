//! The lab's page, embedded in the binary: one HTML file, its style sheet and its
//! script (plain JavaScript, no build step, nothing fetched from the network); and the
//! same page made self-contained, a run's document inline, for `run --html` and the
//! page's "save as page" button.

use serde_json::Value;

/// The page.
pub const INDEX: &str = include_str!("assets/index.html");
/// Its script.
pub const SCRIPT: &str = include_str!("assets/lab.js");
/// Its style sheet.
pub const STYLE: &str = include_str!("assets/lab.css");

/// Where the page links its style sheet and script (replaced by their text inline).
const STYLE_LINK: &str = r#"<link rel="stylesheet" href="lab.css">"#;
const SCRIPT_LINK: &str = r#"<script src="lab.js" defer></script>"#;

/// The page with its style, script and `document` inline: it plays the document offline.
pub fn standalone(document: &Value) -> anyhow::Result<String> {
    anyhow::ensure!(INDEX.contains(STYLE_LINK) && INDEX.contains(SCRIPT_LINK), "the page lost its links");
    // `<` never stands outside a string in JSON, and `\u003c` means it inside one: so no
    // `</script>` or `<!--` can end or bend the data's script element.
    let data = serde_json::to_string(document)?.replace('<', "\\u003c");
    let script = SCRIPT.replace("</script", "<\\/script");
    Ok(INDEX.replace(STYLE_LINK, &format!("<style>\n{STYLE}</style>")).replace(
        SCRIPT_LINK,
        &format!("<script type=\"application/json\" id=\"lab-data\">{data}</script>\n<script>\n{script}</script>"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_standalone_page_holds_everything_and_its_data_reads_back() {
        let document = json!({ "title": "a </script><!-- b", "flow": { "messages": [] } });
        let page = standalone(&document).unwrap();
        assert!(!page.contains("href=\"lab.css\"") && !page.contains("src=\"lab.js\""));
        assert_eq!(page.matches("</script>").count(), 2, "the data's and the script's own ends only");
        let start = page.find(r#"id="lab-data">"#).unwrap() + r#"id="lab-data">"#.len();
        let end = start + page[start..].find("</script>").unwrap();
        let read: Value = serde_json::from_str(&page[start..end]).unwrap();
        assert_eq!(read, document);
        assert!(page.contains(STYLE.trim()) && page.contains("function"));
    }
}
