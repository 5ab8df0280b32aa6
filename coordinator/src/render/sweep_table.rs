//! The sweep's table. Off a terminal (a pipe, a file, the book), a block per algorithm
//! as the OSU micro-benchmarks print it, a line per size as soon as it is measured, in
//! fixed columns that scripts read; on a terminal, the same columns as a house table
//! ([`HouseTable`], arranged to the terminal's width) per algorithm once its sizes are
//! measured, the progress bar counting the points meanwhile.

use serde::Serialize;

use crate::render::dilation::factor_text;
use crate::render::table::HouseTable;

/// One algorithm at one size of a sweep, measured: the OSU columns, the model's time,
/// the bandwidths and the dilation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SweepPoint {
    pub algorithm: String,
    pub size_bytes: u64,
    pub avg_us: f64,
    pub min_us: f64,
    pub max_us: f64,
    pub median_us: f64,
    /// Tail percentiles by [`crate::render::report::nearest_rank`].
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub iterations: u32,
    pub model_us: Option<f64>,
    pub algbw_gbps: Option<f64>,
    pub busbw_gbps: Option<f64>,
    /// K of emulated links (every time above is emulated time); `None` for raw links.
    pub dilation: Option<f64>,
    /// Wall time the point's run took, in seconds.
    pub wall_s: f64,
}

/// The OSU header line of a block (`# Size  Avg(us) ...`), with the model's column when
/// `model` and the dilation's when `dilated`.
pub fn osu_columns(model: bool, dilated: bool) -> String {
    let model = if model { format!(" {:>12}", "Model(us)") } else { String::new() };
    let dilation = if dilated { format!(" {:>9}", "Dilation") } else { String::new() };
    format!(
        "# {:<10} {:>12} {:>12} {:>12} {:>12} {:>12} {:>12} {:>10}{model} {:>12} {:>12}{dilation}",
        "Size",
        "Avg(us)",
        "Min(us)",
        "Max(us)",
        "P50(us)",
        "P90(us)",
        "P99(us)",
        "Iterations",
        "algbw(GB/s)",
        "busbw(GB/s)"
    )
}

/// One point as an OSU line, under [`osu_columns`].
pub fn osu_row(point: &SweepPoint, model: bool) -> String {
    let bw = |v: Option<f64>| v.map(|v| format!("{v:.4}")).unwrap_or_else(|| "-".into());
    let model = if model {
        format!(" {:>12}", point.model_us.map(|m| format!("{m:.2}")).unwrap_or_else(|| "-".into()))
    } else {
        String::new()
    };
    let dilation = point.dilation.map(|k| format!(" {:>9}", format!("x{}", factor_text(k)))).unwrap_or_default();
    format!(
        "{:<12} {:>12.2} {:>12.2} {:>12.2} {:>12.2} {:>12.2} {:>12.2} {:>10}{model} {:>12} {:>12}{dilation}",
        point.size_bytes,
        point.avg_us,
        point.min_us,
        point.max_us,
        point.p50_us,
        point.p90_us,
        point.p99_us,
        point.iterations,
        bw(point.algbw_gbps),
        bw(point.busbw_gbps)
    )
}

/// The points of one algorithm as a house table: the OSU columns, units in the header.
pub fn house_block(points: &[SweepPoint], model: bool) -> HouseTable {
    let dilated = points.iter().any(|point| point.dilation.is_some());
    let mut header = vec!["Size", "Avg µs", "Min µs", "Max µs", "P50 µs", "P90 µs", "P99 µs", "Iterations"];
    if model {
        header.push("Model µs");
    }
    header.extend(["algbw GB/s", "busbw GB/s"]);
    if dilated {
        header.push("Dilation");
    }
    let columns = header.len();
    let mut table = HouseTable::new(header);
    let bandwidth = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |v| format!("{v:.4}"));
    for point in points {
        let mut cells = vec![point.size_bytes.to_string()];
        cells.extend(
            [point.avg_us, point.min_us, point.max_us, point.p50_us, point.p90_us, point.p99_us]
                .map(|us| format!("{us:.2}")),
        );
        cells.push(point.iterations.to_string());
        if model {
            cells.push(point.model_us.map_or_else(|| "-".to_owned(), |us| format!("{us:.2}")));
        }
        cells.extend([bandwidth(point.algbw_gbps), bandwidth(point.busbw_gbps)]);
        if dilated {
            cells.push(point.dilation.map_or_else(|| "-".to_owned(), |k| format!("x{}", factor_text(k))));
        }
        table.row(cells);
    }
    table.right_aligned(&(0..columns).collect::<Vec<_>>());
    table
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::table::Fit;

    fn ring_point() -> SweepPoint {
        SweepPoint {
            algorithm: "ring".into(),
            size_bytes: 65536,
            avg_us: 812.5,
            min_us: 800.0,
            max_us: 830.25,
            median_us: 810.0,
            p50_us: 805.0,
            p90_us: 825.5,
            p99_us: 830.25,
            iterations: 20,
            model_us: Some(790.0),
            algbw_gbps: Some(0.0807),
            busbw_gbps: Some(0.1412),
            dilation: None,
            wall_s: 0.5,
        }
    }

    #[test]
    fn a_row_lines_up_under_its_header() {
        let point = ring_point();
        let (head, line) = (osu_columns(true, false), osu_row(&point, true));
        assert!(head.starts_with("# Size"));
        assert_eq!(head.len(), line.len(), "\n{head}\n{line}");
        let fields: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(
            fields,
            ["65536", "812.50", "800.00", "830.25", "805.00", "825.50", "830.25", "20", "790.00", "0.0807", "0.1412"]
        );
        let dilated = SweepPoint { dilation: Some(29.5), ..point };
        let (head, line) = (osu_columns(true, true), osu_row(&dilated, true));
        assert_eq!(head.len(), line.len(), "\n{head}\n{line}");
        assert!(head.ends_with("Dilation") && line.ends_with("x29.5"), "\n{head}\n{line}");
    }

    #[test]
    fn a_block_on_a_terminal_holds_the_osu_fields_and_fits_its_width() {
        let points = [ring_point(), SweepPoint { size_bytes: 131072, dilation: Some(4.0), ..ring_point() }];
        let natural = house_block(&points, true).render(Fit::Natural);
        let first = natural.lines().nth(3).expect("a row");
        let fields: Vec<&str> = first.split(['│', '┆']).map(str::trim).filter(|f| !f.is_empty()).collect();
        assert_eq!(
            fields,
            [
                "65536", "812.50", "800.00", "830.25", "805.00", "825.50", "830.25", "20", "790.00", "0.0807",
                "0.1412", "-"
            ]
        );
        assert!(natural.contains("x4"), "{natural}");
        let fitted = house_block(&points, true).render(Fit::Columns(120));
        assert!(fitted.lines().all(|line| line.chars().count() <= 120), "{fitted}");
        assert!(natural.lines().any(|line| line.chars().count() > 120), "{natural}");
    }
}
