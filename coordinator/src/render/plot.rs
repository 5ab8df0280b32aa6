//! Sweep plots: time against message size, log-log, one line per algorithm (measured,
//! solid, with a marker per size) and the cost model's prediction for it as a dashed
//! line of the same colour; or (`simulate --plot`) time against node count. The legend
//! stands to the right of the plotting area, outside it, so it hides no line wherever
//! the lines run. Drawn with plotters' SVG backend; `.png` goes through
//! [`crate::render::picture`] like every other picture, so both carry the same embedded font.

use std::path::Path;

use anyhow::anyhow;
use plotters::element::DashedPathElement;
use plotters::prelude::*;

use crate::render::picture;

/// One algorithm's measured times and, when the links were modelled, its predictions.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub label: String,
    /// (bytes per node, µs), in size order.
    pub measured: Vec<(f64, f64)>,
    /// (bytes per node, µs) the cost model predicts; empty without a model.
    pub model: Vec<(f64, f64)>,
}

/// Picture size in pixels.
pub const WIDTH: u32 = 1000;
pub const HEIGHT: u32 = 640;

/// The legend's font size and the height of one entry, in pixels.
const LEGEND_FONT: u32 = 16;
const LEGEND_ROW: i32 = 26;

/// The legend's width: room for its longest label (about 0.6 of the font size per
/// character, with the line sample before it), a third of the picture at most.
fn legend_width(labels: &[&str]) -> u32 {
    let longest = labels.iter().map(|label| label.chars().count()).max().unwrap_or(0) as u32;
    (longest * LEGEND_FONT * 6 / 10 + 64).clamp(120, WIDTH / 3)
}

/// Writes the plot to `path` (`.svg` or `.png`).
pub fn write(title: &str, series: &[Series], path: &Path) -> anyhow::Result<()> {
    write_with(title, series, XAxis::Size, path)
}

/// Writes the plot of `series` against `x` to `path` (.svg or .png).
pub fn write_with(title: &str, series: &[Series], x: XAxis, path: &Path) -> anyhow::Result<()> {
    picture::Format::of(path)?;
    picture::save(&svg_with(title, series, x)?, path)
}

/// What the x axis of a plot counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XAxis {
    /// Bytes per node (a sweep); the dashed lines are the cost model.
    Size,
    /// Nodes (a scaling table); the dashed lines are the closed forms.
    Nodes,
}

impl XAxis {
    fn description(self) -> &'static str {
        match self {
            XAxis::Size => "message size (bytes per node)",
            XAxis::Nodes => "nodes (p)",
        }
    }

    fn label(self, x: f64) -> String {
        match self {
            XAxis::Size => size_label(x),
            XAxis::Nodes => format!("{}", x.round() as u64),
        }
    }

    /// What the dashed lines are, for the legend.
    fn dashed(self) -> &'static str {
        match self {
            XAxis::Size => "cost model (dashed)",
            XAxis::Nodes => "closed form (dashed)",
        }
    }
}

/// The plot as SVG text, against `x`.
pub fn svg_with(title: &str, series: &[Series], x: XAxis) -> anyhow::Result<String> {
    let points = || series.iter().flat_map(|s| s.measured.iter().chain(&s.model)).filter(|(x, y)| *x > 0.0 && *y > 0.0);
    anyhow::ensure!(points().next().is_some(), "nothing to plot: no point was measured");
    let (x_lo, x_hi) = points().fold((f64::MAX, f64::MIN), |(lo, hi), (x, _)| (lo.min(*x), hi.max(*x)));
    let (y_lo, y_hi) = points().fold((f64::MAX, f64::MIN), |(lo, hi), (_, y)| (lo.min(*y), hi.max(*y)));
    let y_range = time_range(y_lo, y_hi);
    let x_range = (x_lo / 1.3)..(x_hi * 1.3);

    let modelled = series.iter().any(|s| !s.model.is_empty());
    let mut labels: Vec<&str> = series.iter().map(|s| s.label.as_str()).collect();
    if modelled {
        labels.push(x.dashed());
    }
    let mut text = String::new();
    {
        let root = SVGBackend::with_string(&mut text, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_error)?;
        let (plot_area, legend_area) = root.split_horizontally(WIDTH - legend_width(&labels));
        let mut chart = ChartBuilder::on(&plot_area)
            .caption(title, ("sans-serif", 24))
            .margin(18)
            .x_label_area_size(56)
            .y_label_area_size(76)
            .build_cartesian_2d(
                LogCoord::from(x_range.clone().log_scale().base(2.0)).with_key_points(size_ticks(x_range)),
                y_range.log_scale(),
            )
            .map_err(plot_error)?;
        chart
            .configure_mesh()
            .x_desc(x.description())
            .y_desc("time per iteration (µs)")
            .x_labels(30)
            .y_labels(10)
            .x_label_formatter(&|at| x.label(*at))
            .y_label_formatter(&|y| time_label(*y))
            .label_style(("sans-serif", 16))
            .axis_desc_style(("sans-serif", 18))
            .light_line_style(RGBColor(240, 240, 240))
            .bold_line_style(RGBColor(215, 215, 215))
            .draw()
            .map_err(plot_error)?;
        for (i, s) in series.iter().enumerate() {
            let ink = ink(i);
            let line = ink.stroke_width(2);
            chart.draw_series(LineSeries::new(s.measured.iter().copied(), line)).map_err(plot_error)?;
            chart
                .draw_series(s.measured.iter().map(|&point| Circle::new(point, 3, ink.filled())))
                .map_err(plot_error)?;
            if !s.model.is_empty() {
                chart.draw_series(DashedLineSeries::new(s.model.iter().copied(), 7, 5, line)).map_err(plot_error)?;
            }
        }
        draw_legend(&legend_area, series, modelled.then(|| x.dashed()))?;
        root.present().map_err(plot_error)?;
    }
    Ok(text)
}

/// The legend, in its own area beside the plot: a line sample and marker per series,
/// then (`dashed`) one entry saying what the dashed lines are (their colour says whose).
fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    series: &[Series],
    dashed: Option<&str>,
) -> anyhow::Result<()> {
    let font = ("sans-serif", LEGEND_FONT).into_font().color(&BLACK);
    // Level with the top of the plotting area (the caption's height and the margin).
    let top = 18 + 40;
    let row = |i: usize| top + LEGEND_ROW * i as i32;
    let sample = |y: i32| vec![(8, y), (32, y)];
    for (i, s) in series.iter().enumerate() {
        let ink = ink(i);
        let y = row(i);
        area.draw(&PathElement::new(sample(y), ink.stroke_width(2))).map_err(plot_error)?;
        area.draw(&Circle::new((20, y), 3, ink.filled())).map_err(plot_error)?;
        area.draw(&Text::new(s.label.clone(), (40, y - LEGEND_FONT as i32 / 2), font.clone())).map_err(plot_error)?;
    }
    if let Some(dashed) = dashed {
        let y = row(series.len());
        let grey = RGBColor(110, 110, 110);
        area.draw(&DashedPathElement::new(sample(y), 5, 3, grey.stroke_width(2))).map_err(plot_error)?;
        area.draw(&Text::new(dashed.to_owned(), (40, y - LEGEND_FONT as i32 / 2), font)).map_err(plot_error)?;
    }
    Ok(())
}

fn plot_error<E: std::fmt::Debug>(error: E) -> anyhow::Error {
    anyhow!("drawing the plot: {error:?}")
}

fn ink(i: usize) -> RGBColor {
    let hex = picture::colour(i).trim_start_matches('#');
    let part = |k: usize| u8::from_str_radix(&hex[k..k + 2], 16).unwrap_or(0);
    RGBColor(part(0), part(2), part(4))
}

/// The time axis: the data with some room, or whole decades when that room holds no
/// power of ten (the log axis labels only those).
fn time_range(lo: f64, hi: f64) -> std::ops::Range<f64> {
    let (lo, hi) = (lo / 1.4, hi * 1.4);
    if hi.log10().floor() >= lo.log10().ceil() {
        lo..hi
    } else {
        10f64.powf(lo.log10().floor())..10f64.powf(hi.log10().ceil())
    }
}

/// Powers of two in `range` to label: every 2^k with k a multiple of 1, 2, 5 or 10
/// (whichever gives at most 12), so that 1 KiB and 1 MiB are among them when in range.
fn size_ticks(range: std::ops::Range<f64>) -> Vec<f64> {
    let (lo, hi) = (range.start.log2().ceil() as i32, range.end.log2().floor() as i32);
    let every = [1, 2, 5, 10].into_iter().find(|&k| (hi - lo) / k < 12).unwrap_or(10);
    (lo..=hi).filter(|e| e.rem_euclid(every) == 0).map(|e| 2f64.powi(e)).collect()
}

/// A size on the axis: "8 B", "1 KiB", "64 KiB", "8 MiB".
fn size_label(bytes: f64) -> String {
    crate::render::quantity::size_text(bytes.round() as u64)
}

/// A time on the axis: "0.1", "1", "10", "100", "1000", "100000"; "1e7" from ten seconds.
fn time_label(us: f64) -> String {
    if us >= 1e7 {
        format!("{us:.0e}")
    } else if us >= 1.0 {
        format!("{us:.0}")
    } else {
        format!("{us}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series() -> Vec<Series> {
        let sizes: Vec<f64> = (3..=20).map(|k| (1u64 << k) as f64).collect();
        let line = |ts: f64, per_byte: f64| sizes.iter().map(|&s| (s, ts + per_byte * s)).collect::<Vec<_>>();
        vec![
            Series { label: "ring".into(), measured: line(210.0, 0.012), model: line(200.0, 0.01) },
            Series { label: "hypercube".into(), measured: line(90.0, 0.03), model: line(80.0, 0.028) },
        ]
    }

    #[test]
    fn the_plot_has_a_line_per_algorithm_and_a_dashed_one_per_model() {
        let text = svg_with("allreduce on a ring of 8 nodes", &series(), XAxis::Size).unwrap();
        let doc = roxmltree::Document::parse(&text).expect("valid XML");
        let polylines: Vec<_> = doc.descendants().filter(|n| n.has_tag_name("polyline")).collect();
        // Two measured lines; the dashed model lines are drawn as many short segments.
        let long =
            polylines.iter().filter(|n| n.attribute("points").is_some_and(|p| p.split(' ').count() >= 18)).count();
        assert_eq!(long, 2, "{text}");
        let circles = doc.descendants().filter(|n| n.has_tag_name("circle")).count();
        assert_eq!(circles, 2 * 18 + 2, "a marker per size, and one per legend entry");
        let texts: Vec<&str> = doc.descendants().filter_map(|n| n.text()).map(str::trim).collect();
        for label in ["ring", "hypercube", "cost model (dashed)", "16 B", "1 KiB", "1 MiB"] {
            assert!(texts.contains(&label), "no {label:?} in {texts:?}");
        }
    }

    /// The x of every `text` element whose content is `label`.
    fn text_x(doc: &roxmltree::Document, label: &str) -> Vec<f64> {
        doc.descendants()
            .filter(|n| n.has_tag_name("text") && n.text().map(str::trim) == Some(label))
            .filter_map(|n| n.attribute("x")?.parse().ok())
            .collect()
    }

    #[test]
    fn the_legend_stands_right_of_every_line() {
        // A scaling plot: the lowest line (hypercube) runs along the bottom right, where
        // a legend inside the plot would hide it.
        let nodes: Vec<f64> = (6..=12).map(|k| (1u64 << k) as f64).collect();
        let line = |per_node: f64| nodes.iter().map(|&p| (p, 60.0 + per_node * p)).collect::<Vec<_>>();
        let scaling = vec![
            Series { label: "hypercube (recursive-doubling)".into(), measured: line(0.02), model: line(0.02) },
            Series { label: "torus (mesh)".into(), measured: line(0.7), model: vec![] },
            Series { label: "ring (ring)".into(), measured: line(22.0), model: vec![] },
        ];
        let text = svg_with("allreduce, 8 B per node, simulated", &scaling, XAxis::Nodes).unwrap();
        let doc = roxmltree::Document::parse(&text).expect("valid XML");
        let rightmost_line = doc
            .descendants()
            .filter(|n| n.has_tag_name("polyline"))
            .filter_map(|n| n.attribute("points"))
            .flat_map(|points| points.split_whitespace().filter_map(|xy| xy.split(',').next()?.parse::<f64>().ok()))
            .fold(f64::MIN, f64::max);
        for label in ["hypercube (recursive-doubling)", "torus (mesh)", "ring (ring)", "closed form (dashed)"] {
            let xs = text_x(&doc, label);
            assert_eq!(xs.len(), 1, "one legend entry {label:?}: {xs:?}");
            assert!(xs[0] > rightmost_line, "{label:?} at x {} is not right of the lines (to {rightmost_line})", xs[0]);
            assert!(xs[0] < f64::from(WIDTH) - 20.0, "{label:?} inside the picture");
        }
    }

    #[test]
    fn a_single_size_still_plots_and_rasterises() {
        let one = vec![Series { label: "ring".into(), measured: vec![(65536.0, 812.0)], model: vec![] }];
        let text = svg_with("one point", &one, XAxis::Size).unwrap();
        let bytes = picture::png(&text).unwrap();
        let decoder = ::png::Decoder::new(std::io::Cursor::new(bytes));
        let reader = decoder.read_info().unwrap();
        assert_eq!((reader.info().width, reader.info().height), (WIDTH, HEIGHT));
    }

    #[test]
    fn nothing_to_plot_is_an_error() {
        assert!(svg_with("empty", &[], XAxis::Size).unwrap_err().to_string().contains("nothing to plot"));
    }

    #[test]
    fn the_time_axis_always_holds_a_power_of_ten() {
        let r = time_range(450.0, 600.0);
        assert_eq!((r.start, r.end), (100.0, 1000.0));
        let r = time_range(700.0, 30000.0);
        assert!(r.start > 400.0 && r.end < 50000.0, "{r:?}");
    }

    #[test]
    fn axis_labels_read_well() {
        assert_eq!(size_label(8.0), "8 B");
        assert_eq!(size_label(1024.0), "1 KiB");
        assert_eq!(size_label(8.0 * 1024.0 * 1024.0), "8 MiB");
        assert_eq!(time_label(100.0), "100");
        assert_eq!(time_label(0.1), "0.1");
    }
}
