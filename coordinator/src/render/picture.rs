//! Pictures as files. Space-time diagrams, topology pictures and sweep plots are made
//! as SVG text; [`save`] writes that text as is (`.svg`) or rasterises it with resvg
//! (`.png`). The PNG's text is set in DejaVu Sans, which is embedded in the binary and
//! is the only font the rasteriser sees: no system font is read, so a picture comes
//! out the same on every machine.
//!
//! Also the small SVG writer ([`Svg`]) that the diagram and topology pictures share.
//! This module knows nothing of collectives, topologies or runs.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use anyhow::{Context, bail};
use resvg::{tiny_skia, usvg};

/// The family every picture's text asks for: the embedded font's.
pub const FONT_FAMILY: &str = "DejaVu Sans";

/// The file formats a picture can be saved as, chosen by the file's extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Svg,
    Png,
}

impl Format {
    /// The format `path`'s extension names (`.svg` or `.png`, in any case).
    pub fn of(path: &Path) -> anyhow::Result<Format> {
        match path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase).as_deref() {
            Some("svg") => Ok(Format::Svg),
            Some("png") => Ok(Format::Png),
            _ => bail!("{} must end in .svg or .png (the extension chooses the format)", path.display()),
        }
    }
}

/// Writes `svg` to `path`: as is for `.svg`, rasterised for `.png`.
pub fn save(svg: &str, path: &Path) -> anyhow::Result<()> {
    let bytes = match Format::of(path)? {
        Format::Svg => svg.as_bytes().to_vec(),
        Format::Png => png(svg)?,
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    topocomm_collectives::files::write(path, bytes).with_context(|| format!("writing {}", path.display()))
}

/// `svg` rasterised to PNG bytes, one pixel per SVG user unit, on a white background.
pub fn png(svg: &str) -> anyhow::Result<Vec<u8>> {
    let options = usvg::Options { fontdb: fonts(), font_family: FONT_FAMILY.to_owned(), ..usvg::Options::default() };
    let tree = usvg::Tree::from_str(svg, &options).context("the picture is not valid SVG")?;
    let size = tree.size().to_int_size();
    let mut pixmap = tiny_skia::Pixmap::new(size.width(), size.height())
        .with_context(|| format!("cannot make a {}x{} picture", size.width(), size.height()))?;
    pixmap.fill(tiny_skia::Color::WHITE);
    resvg::render(&tree, tiny_skia::Transform::identity(), &mut pixmap.as_mut());
    pixmap.encode_png().context("encoding the PNG")
}

/// The embedded fonts, loaded once.
fn fonts() -> Arc<usvg::fontdb::Database> {
    static FONTS: OnceLock<Arc<usvg::fontdb::Database>> = OnceLock::new();
    FONTS
        .get_or_init(|| {
            let mut db = usvg::fontdb::Database::new();
            db.load_font_data(dejavu::sans::regular().to_vec());
            db.load_font_data(dejavu::sans::bold().to_vec());
            db.set_sans_serif_family(FONT_FAMILY);
            Arc::new(db)
        })
        .clone()
}

/// Escapes text for SVG content and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            c => out.push(c),
        }
    }
    out
}

/// A qualitative palette (Tableau 10): distinct hues that stay apart when printed grey.
pub const PALETTE: [&str; 10] =
    ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];

/// Colour `i` of [`PALETTE`], cycling.
pub fn colour(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

/// An SVG document being written: elements are appended as text. Attributes are
/// passed as raw `name="value"` text (numbers formatted with [`n`]); text content is
/// escaped here.
pub struct Svg {
    body: String,
    width: f64,
    height: f64,
}

/// A coordinate or length, with at most two decimals and no trailing zeros.
pub fn n(value: f64) -> String {
    let rounded = (value * 100.0).round() / 100.0;
    let text = format!("{rounded:.2}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    if text == "-0" { "0".to_owned() } else { text.to_owned() }
}

impl Svg {
    /// An empty `width` x `height` picture on white (rounded up to whole pixels).
    pub fn new(width: f64, height: f64) -> Self {
        let (width, height) = (width.ceil(), height.ceil());
        let mut svg = Svg { body: String::new(), width, height };
        svg.raw(&format!(r#"<rect x="0" y="0" width="{}" height="{}" fill="white"/>"#, n(width), n(height)));
        svg
    }

    /// Appends raw SVG markup.
    pub fn raw(&mut self, markup: &str) {
        self.body.push_str(markup);
        self.body.push('\n');
    }

    /// A straight line.
    pub fn line(&mut self, (x1, y1): (f64, f64), (x2, y2): (f64, f64), attrs: &str) {
        let _ = writeln!(self.body, r#"<line x1="{}" y1="{}" x2="{}" y2="{}" {attrs}/>"#, n(x1), n(y1), n(x2), n(y2));
    }

    /// A circle.
    pub fn circle(&mut self, (cx, cy): (f64, f64), r: f64, attrs: &str) {
        let _ = writeln!(self.body, r#"<circle cx="{}" cy="{}" r="{}" {attrs}/>"#, n(cx), n(cy), n(r));
    }

    /// A path with data `d`.
    pub fn path(&mut self, d: &str, attrs: &str) {
        let _ = writeln!(self.body, r#"<path d="{d}" {attrs}/>"#);
    }

    /// Text at `(x, y)` (the baseline; `attrs` may set text-anchor and so on).
    pub fn text(&mut self, (x, y): (f64, f64), size: f64, content: &str, attrs: &str) {
        let _ = writeln!(
            self.body,
            r#"<text x="{}" y="{}" font-size="{}" {attrs}>{}</text>"#,
            n(x),
            n(y),
            n(size),
            escape(content)
        );
    }

    /// Opens a group (close it with [`Svg::close`]).
    pub fn open(&mut self, attrs: &str) {
        let _ = writeln!(self.body, "<g {attrs}>");
    }

    /// Closes the innermost open group.
    pub fn close(&mut self) {
        self.body.push_str("</g>\n");
    }

    /// The finished document, with `defs` (markers and the like) in its head.
    pub fn finish(self, defs: &str) -> String {
        format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" \
             font-family=\"{FONT_FAMILY}, sans-serif\">\n<defs>{defs}</defs>\n{}</svg>\n",
            self.body,
            w = n(self.width),
            h = n(self.height),
        )
    }
}

/// "Nice" tick values covering `[lo, hi]`: steps of 1, 2 or 5 times a power of ten,
/// about `count` of them.
pub fn ticks(lo: f64, hi: f64, count: usize) -> Vec<f64> {
    if hi.partial_cmp(&lo) != Some(std::cmp::Ordering::Greater) || !lo.is_finite() || !hi.is_finite() {
        return vec![lo];
    }
    let raw = (hi - lo) / count.max(1) as f64;
    let power = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0].into_iter().map(|m| m * power).find(|s| *s >= raw).unwrap_or(10.0 * power);
    let first = (lo / step).ceil() as i64;
    let last = (hi / step + 1e-9).floor() as i64;
    (first..=last).map(|i| i as f64 * step).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_short_and_text_is_escaped() {
        assert_eq!(n(1.0), "1");
        assert_eq!(n(1.256), "1.26");
        assert_eq!(n(-0.001), "0");
        assert_eq!(n(12.5), "12.5");
        assert_eq!(escape("a<b & \"c\">"), "a&lt;b &amp; &quot;c&quot;&gt;");
    }

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        assert_eq!(ticks(0.0, 10.0, 5), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        assert_eq!(ticks(0.0, 1000.0, 4), vec![0.0, 500.0, 1000.0]);
        let t = ticks(3.0, 97.0, 6);
        assert!(t.first().unwrap() >= &3.0 && t.last().unwrap() <= &97.0 && t.len() >= 4, "{t:?}");
    }

    #[test]
    fn the_format_follows_the_extension() {
        assert_eq!(Format::of(Path::new("a/b.SVG")).unwrap(), Format::Svg);
        assert_eq!(Format::of(Path::new("b.png")).unwrap(), Format::Png);
        assert!(Format::of(Path::new("b.jpg")).unwrap_err().to_string().contains(".svg or .png"));
    }

    #[test]
    fn an_svg_rasterises_to_a_png_of_its_size_with_text() {
        let mut svg = Svg::new(120.0, 40.0);
        svg.text((10.0, 25.0), 14.0, "node 7", r#"fill="black""#);
        let bytes = png(&svg.finish("")).unwrap();
        let decoder = ::png::Decoder::new(std::io::Cursor::new(bytes));
        let mut reader = decoder.read_info().unwrap();
        let mut pixels = vec![0; reader.output_buffer_size().unwrap()];
        let info = reader.next_frame(&mut pixels).unwrap();
        assert_eq!((info.width, info.height), (120, 40));
        // The embedded font drew the text: some pixels are dark.
        assert!(pixels.chunks(4).any(|px| px[0] < 100), "no text was drawn");
    }
}
