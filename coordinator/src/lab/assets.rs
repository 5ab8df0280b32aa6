//! The lab's page, embedded in the binary: one HTML file, its style sheet and its
//! script in named parts (plain JavaScript, no build step, nothing fetched from the
//! network), served in their order; and the same page made self-contained, a run's
//! document and every part inline, for `run --html` and the page's "save as page" button.

use serde_json::Value;

/// The page.
pub const INDEX: &str = include_str!("assets/index.html");
/// Its style sheet.
pub const STYLE: &str = include_str!("assets/lab.css");

/// One part of the page's script: the path it is served at and its text.
#[derive(Debug, Clone, Copy)]
pub struct ScriptPart {
    pub path: &'static str,
    pub text: &'static str,
}

/// The script's parts, in the order the page runs them (each uses the ones before it),
/// at the end of its body: the load guard (a part that fails to load is said on the
/// page), the shared base (element map, builders, error line), the API, the charts, the
/// animation, and the ui, which starts the page once every part before it is there.
pub const SCRIPT_PARTS: [ScriptPart; 6] = [
    ScriptPart { path: "/lab/guard.js", text: include_str!("assets/lab/guard.js") },
    ScriptPart { path: "/lab/page.js", text: include_str!("assets/lab/page.js") },
    ScriptPart { path: "/lab/api.js", text: include_str!("assets/lab/api.js") },
    ScriptPart { path: "/lab/charts.js", text: include_str!("assets/lab/charts.js") },
    ScriptPart { path: "/lab/animation.js", text: include_str!("assets/lab/animation.js") },
    ScriptPart { path: "/lab/ui.js", text: include_str!("assets/lab/ui.js") },
];

/// Where the page links its style sheet (replaced by its text inline).
const STYLE_LINK: &str = r#"<link rel="stylesheet" href="lab.css">"#;

/// Where the page links a part of its script (replaced by its text inline).
fn script_link(part: &ScriptPart) -> String {
    format!(r#"<script src="{}"></script>"#, part.path.trim_start_matches('/'))
}

/// The page with its style, script and `document` inline: it plays the document offline.
pub fn standalone(document: &Value) -> anyhow::Result<String> {
    anyhow::ensure!(
        INDEX.contains(STYLE_LINK) && SCRIPT_PARTS.iter().all(|part| INDEX.contains(&script_link(part))),
        "the page lost its links"
    );
    // `<` never stands outside a string in JSON, and `\u003c` means it inside one: so no
    // `</script>` or `<!--` can end or bend the data's script element.
    let data = serde_json::to_string(document)?.replace('<', "\\u003c");
    let mut page = INDEX.replace(STYLE_LINK, &format!("<style>\n{STYLE}</style>"));
    for part in &SCRIPT_PARTS {
        let script = part.text.replace("</script", "<\\/script");
        // The data goes before the shared base, which reads it.
        let data = if part.path == "/lab/page.js" {
            format!("<script type=\"application/json\" id=\"lab-data\">{data}</script>\n")
        } else {
            String::new()
        };
        page = page.replace(&script_link(part), &format!("{data}<script>\n{script}</script>"));
    }
    Ok(page)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_standalone_page_holds_everything_and_its_data_reads_back() {
        let document = json!({ "title": "a </script><!-- b", "flow": { "messages": [] } });
        let page = standalone(&document).unwrap();
        assert!(!page.contains("href=\"lab.css\"") && !page.contains("src=\"lab/"));
        assert_eq!(
            page.matches("</script>").count(),
            SCRIPT_PARTS.len() + 1,
            "the data's and each part's own ends only"
        );
        let start = page.find(r#"id="lab-data">"#).unwrap() + r#"id="lab-data">"#.len();
        let end = start + page[start..].find("</script>").unwrap();
        let read: Value = serde_json::from_str(&page[start..end]).unwrap();
        assert_eq!(read, document);
        assert!(page.contains(STYLE.trim()));
        let mut at = 0;
        for part in SCRIPT_PARTS {
            let found = page[at..].find(part.text.trim()).unwrap_or_else(|| panic!("{} inline, in order", part.path));
            at += found;
        }
    }

    #[test]
    fn every_part_is_linked_once_in_order_and_registers_its_name() {
        let mut at = 0;
        for part in SCRIPT_PARTS {
            let link = script_link(&part);
            assert_eq!(INDEX.matches(&link).count(), 1, "{link}");
            let found = INDEX.find(&link).unwrap();
            assert!(found > at, "{} out of order", part.path);
            at = found;
            let name = part.path.trim_start_matches("/lab/").trim_end_matches(".js");
            if name == "guard" {
                continue;
            }
            let registers =
                if name == "page" { "parts: ['page']".to_owned() } else { format!("lab.parts.push('{name}')") };
            assert!(part.text.contains(&registers), "{} registers as {name:?}", part.path);
        }
    }

    #[test]
    fn the_page_draws_in_the_pictures_palette() {
        let charts = SCRIPT_PARTS.iter().find(|part| part.path == "/lab/charts.js").unwrap().text;
        let line = charts.lines().find(|line| line.contains("const PALETTE = [")).expect("the charts' palette");
        let colours: Vec<&str> = line.split('\'').skip(1).step_by(2).collect();
        assert_eq!(colours, crate::render::picture::PALETTE);
    }

    #[test]
    fn no_part_looks_an_element_up_outside_the_map() {
        for part in SCRIPT_PARTS.iter().filter(|part| !["/lab/page.js", "/lab/guard.js"].contains(&part.path)) {
            for lookup in ["querySelector", "getElementById(", "$('#"] {
                assert!(
                    !part.text.contains(lookup) || part.path == "/lab/ui.js" && lookup == "getElementById(",
                    "{} looks up {lookup}…: name it in page.js's SELECTORS",
                    part.path
                );
            }
        }
    }
}
