//! `cufold-report`: turns the benchmark JSON measured on the GPU machine into the tables and
//! SVG plots of `BENCHMARKS.md`. It needs no GPU and no system fonts (SVG text only).
//!
//! ```text
//! cargo run -p cufold-report -- DIR [--date TEXT] [--benchmarks BENCHMARKS.md]
//!                                   [--out DIR] [--scan-log2 20,24,28]
//! ```
//!
//! `DIR` holds the files of one `bash scripts/gpu-session.sh report` call. Any of them may be
//! missing; what is missing is skipped with a note on stderr:
//!
//! | files                               | rows                                  | used for          |
//! |-------------------------------------|---------------------------------------|-------------------|
//! | `reduce.json`, `peers.json`         | reductions (and copy), 2^24 and 2^28  | reductions tables |
//! | `sweep.json`, `peers_sweep.json`    | reductions over 2^10 .. 2^30          | reduction plots   |
//! | `scan.json`, `peers_scan.json`      | scans over 2^10 .. 2^28               | scans table, plot |
//! | `small.json`, `peers_small.json`    | reductions of small inputs            | µs table          |
//!
//! The `cufold` files come from `benches/gpu_reduce.rs` and `benches/gpu_scan.rs` (`--json`),
//! the `peers*` files from `scripts/peers.py` (libraries `torch`, `cupy` and `copy`).
//!
//! Outputs, under `docs/bench/` of the repository (or `--out DIR`):
//! * `sums.svg`, `extremes.svg`, `arg.svg`, `meanvar.svg`, `scans.svg`: GB/s against N, one
//!   line per (library, op, dtype), plus the device copy of each dtype (grey, dashed);
//! * `tables.md`, also printed to stdout: the tables and links to the plots;
//! * with `--benchmarks FILE`: the text between the lines `<!-- report:begin -->` and
//!   `<!-- report:end -->` of FILE is replaced by `tables.md` (image links made relative to
//!   FILE); without those markers, they are appended with the content.
//!
//! `--date TEXT` adds a date to the header line; `--scan-log2` picks the N of the scans table.

use std::collections::BTreeSet;
use std::error::Error;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use plotters::element::DashedPathElement;
use plotters::prelude::*;
use serde_json::Value;

/// Result with any error, reported by `main`.
type Res<T> = Result<T, Box<dyn Error>>;

/// First marker line of the generated part of `--benchmarks FILE`.
const BEGIN: &str = "<!-- report:begin -->";
/// Last marker line of the generated part of `--benchmarks FILE`.
const END: &str = "<!-- report:end -->";
/// The peer libraries of `scripts/peers.py`, in table order.
const PEERS: [&str; 2] = ["torch", "cupy"];
/// The libraries a plot draws a line for, in legend order (the copy comes last).
const LIBS: [&str; 3] = ["cufold", "torch", "cupy"];
/// Placeholder for a number that was not measured (or a call a library lacks).
const NONE: &str = "—";

/// The plots: file name and the ops each shows (cufold and peer op names alike).
const PLOTS: [(&str, &[&str]); 5] = [
    ("sums", &["sum", "mean", "widesum", "div2mean", "prod"]),
    ("extremes", &["min", "max", "minmax"]),
    ("arg", &["argmin", "argmax"]),
    ("meanvar", &["meanvar"]),
    ("scans", &["cumsum", "affine"]),
];

/// Line colours, one per (op, dtype) of a plot (grey is kept for the copy).
const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
    RGBColor(0, 0, 128),
];

/// One measurement: a row of any of the JSON files.
#[derive(Clone, Debug, PartialEq)]
struct Row {
    /// `cufold`, `torch`, `cupy` or `copy`.
    lib: String,
    /// Operator, e.g. `sum`, `div2mean`, `cumsum`, `copy`.
    op: String,
    /// Element type, e.g. `f32`.
    dtype: String,
    /// Number of elements.
    n: u64,
    /// Median milliseconds per call.
    ms: f64,
    /// GB/s of compulsory traffic (read + write for scans and copies).
    gbs: f64,
    /// cufold reductions: `Some(false)` when the result disagreed with the CPU backend.
    checked: Option<bool>,
    /// GPU name.
    device: Option<String>,
}

/// Every input file of one call; a missing file is an empty list.
#[derive(Default)]
struct Data {
    reduce: Vec<Row>,
    peers: Vec<Row>,
    sweep: Vec<Row>,
    peers_sweep: Vec<Row>,
    small: Vec<Row>,
    peers_small: Vec<Row>,
    scan: Vec<Row>,
    peers_scan: Vec<Row>,
}

impl Data {
    /// Reads the files of `dir`, noting on stderr each one missing or unreadable.
    fn load(dir: &Path) -> Data {
        let f = |name: &str| load(&dir.join(name));
        Data {
            reduce: f("reduce.json"),
            peers: f("peers.json"),
            sweep: f("sweep.json"),
            peers_sweep: f("peers_sweep.json"),
            small: f("small.json"),
            peers_small: f("peers_small.json"),
            scan: f("scan.json"),
            peers_scan: f("peers_scan.json"),
        }
    }

    /// The first device name of any row.
    fn device(&self) -> Option<&str> {
        [
            &self.reduce,
            &self.peers,
            &self.sweep,
            &self.peers_sweep,
            &self.small,
            &self.peers_small,
            &self.scan,
            &self.peers_scan,
        ]
        .into_iter()
        .flatten()
        .find_map(|r| r.device.as_deref())
    }
}

/// Command-line arguments.
#[derive(Debug)]
struct Args {
    dir: PathBuf,
    date: Option<String>,
    benchmarks: Option<PathBuf>,
    out: Option<PathBuf>,
    scan_log2: Vec<u32>,
}

/// Parses the arguments after the program name; `Ok(None)` for `--help`.
fn parse_args(mut it: impl Iterator<Item = String>) -> Result<Option<Args>, String> {
    let (mut dir, mut date, mut benchmarks, mut out) = (None, None, None, None);
    let mut scan_log2 = vec![20, 24, 28];
    while let Some(a) = it.next() {
        let mut value = || it.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "-h" | "--help" => return Ok(None),
            "--date" => date = Some(value()?),
            "--benchmarks" => benchmarks = Some(PathBuf::from(value()?)),
            "--out" => out = Some(PathBuf::from(value()?)),
            "--scan-log2" => {
                scan_log2 = value()?
                    .split(',')
                    .map(|s| {
                        s.trim()
                            .parse()
                            .map_err(|_| format!("bad --scan-log2 {s:?}"))
                    })
                    .collect::<Result<_, _>>()?
            }
            s if s.starts_with('-') => return Err(format!("unknown option {s}")),
            _ if dir.is_none() => dir = Some(PathBuf::from(a)),
            _ => return Err(format!("unexpected argument {a}")),
        }
    }
    let dir = dir.ok_or("missing DIR")?;
    Ok(Some(Args {
        dir,
        date,
        benchmarks,
        out,
        scan_log2,
    }))
}

/// Parses a JSON array of rows, skipping (and counting) rows that lack a required field.
fn parse_rows(text: &str) -> Result<(Vec<Row>, usize), String> {
    let v: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let items = v.as_array().ok_or("not a JSON array")?;
    let s = |o: &Value, k: &str| o.get(k).and_then(Value::as_str).map(str::to_owned);
    let rows: Vec<Row> = items
        .iter()
        .filter_map(|o| {
            Some(Row {
                lib: s(o, "lib")?,
                op: s(o, "op")?,
                dtype: s(o, "dtype")?,
                n: o.get("n")?.as_u64()?,
                ms: o.get("ms")?.as_f64()?,
                gbs: o.get("gbs")?.as_f64()?,
                checked: o.get("checked").and_then(Value::as_bool),
                device: s(o, "device"),
            })
        })
        .collect();
    let skipped = items.len() - rows.len();
    Ok((rows, skipped))
}

/// Reads the rows of one file; a missing or bad file gives none, with a note on stderr.
fn load(path: &Path) -> Vec<Row> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("note: {} skipped: {e}", path.display());
            return Vec::new();
        }
    };
    match parse_rows(&text) {
        Ok((rows, skipped)) => {
            if skipped > 0 {
                eprintln!(
                    "note: {}: {skipped} incomplete rows skipped",
                    path.display()
                );
            }
            rows
        }
        Err(e) => {
            eprintln!("note: {} skipped: {e}", path.display());
            Vec::new()
        }
    }
}

/// The peers' name for a cufold op: `div2mean` is compared with `mean`.
fn peer_op(op: &str) -> &str {
    if op == "div2mean" {
        "mean"
    } else {
        op
    }
}

/// The fastest row of `lib` for (`op`, `dtype`, `n`): several rows are several scan configs.
fn find<'a>(rows: &'a [Row], lib: &str, op: &str, dtype: &str, n: u64) -> Option<&'a Row> {
    rows.iter()
        .filter(|r| r.lib == lib && r.op == op && r.dtype == dtype && r.n == n)
        .max_by(|a, b| a.gbs.total_cmp(&b.gbs))
}

/// The faster peer (torch or CuPy) on what cufold's `op` computes, if either measured it.
fn best_peer<'a>(peers: &'a [Row], op: &str, dtype: &str, n: u64) -> Option<&'a Row> {
    PEERS
        .iter()
        .filter_map(|lib| find(peers, lib, peer_op(op), dtype, n))
        .max_by(|a, b| a.gbs.total_cmp(&b.gbs))
}

/// The distinct (op, dtype, n) of cufold's rows, in file order.
fn cases(rows: &[Row]) -> Vec<(&str, &str, u64)> {
    let mut seen = BTreeSet::new();
    rows.iter()
        .filter(|r| r.lib == "cufold")
        .map(|r| (r.op.as_str(), r.dtype.as_str(), r.n))
        .filter(|k| seen.insert(*k))
        .collect()
}

/// `2^k` for a power of two, the plain number otherwise.
fn log2_label(n: u64) -> String {
    if n.is_power_of_two() {
        format!("2^{}", n.trailing_zeros())
    } else {
        n.to_string()
    }
}

/// A rate or time with three significant digits or more (`2024`, `38.5`, `4.17`).
fn num(v: f64) -> String {
    match v.abs() {
        a if a >= 100.0 => format!("{v:.0}"),
        a if a >= 10.0 => format!("{v:.1}"),
        _ => format!("{v:.2}"),
    }
}

/// `num` of a value, or `—`.
fn cell(v: Option<f64>) -> String {
    v.map_or(NONE.into(), num)
}

/// The op column: `div2mean` says what it is compared with; a failed check is flagged.
fn op_label(r: &Row) -> String {
    let mut s = r.op.clone();
    if r.op != peer_op(&r.op) {
        s += &format!(" (vs {})", peer_op(&r.op));
    }
    if r.checked == Some(false) {
        s += " **MISMATCH**";
    }
    s
}

/// GB/s table of cufold's rows at the given `ns` against torch, CuPy and the copy.
fn gbs_table(cufold: &[Row], peers: &[Row], ns: &[u64]) -> String {
    let mut t = String::from(
        "| op | dtype | N | cufold GB/s | torch | CuPy (CUB) | copy | cufold / best peer | % of copy |\n\
         |---|---|---|---:|---:|---:|---:|---:|---:|\n",
    );
    for (op, dtype, n) in cases(cufold).into_iter().filter(|c| ns.contains(&c.2)) {
        let Some(c) = find(cufold, "cufold", op, dtype, n) else {
            continue;
        };
        let peer = |lib| find(peers, lib, peer_op(op), dtype, n).map(|r| r.gbs);
        let copy = find(peers, "copy", "copy", dtype, n).map(|r| r.gbs);
        let ratio = best_peer(peers, op, dtype, n).map(|p| format!("{:.2}", c.gbs / p.gbs));
        let pct = copy.map(|g| format!("{:.0}%", 100.0 * c.gbs / g));
        let _ = writeln!(
            t,
            "| {} | {dtype} | {} | {} | {} | {} | {} | {} | {} |",
            op_label(c),
            log2_label(n),
            num(c.gbs),
            cell(peer("torch")),
            cell(peer("cupy")),
            cell(copy),
            ratio.as_deref().unwrap_or(NONE),
            pct.as_deref().unwrap_or(NONE),
        );
    }
    t
}

/// Microseconds per call of cufold's rows against torch and CuPy.
fn small_table(cufold: &[Row], peers: &[Row]) -> String {
    let mut t = String::from(
        "| op | dtype | N | cufold µs | torch µs | CuPy µs |\n|---|---|---|---:|---:|---:|\n",
    );
    for (op, dtype, n) in cases(cufold) {
        let Some(c) = find(cufold, "cufold", op, dtype, n) else {
            continue;
        };
        let us = |lib| find(peers, lib, peer_op(op), dtype, n).map(|r| r.ms * 1e3);
        let _ = writeln!(
            t,
            "| {} | {dtype} | {} | {} | {} | {} |",
            op_label(c),
            log2_label(n),
            num(c.ms * 1e3),
            cell(us("torch")),
            cell(us("cupy")),
        );
    }
    t
}

/// The distinct N of cufold's rows, ascending.
fn sizes(rows: &[Row]) -> Vec<u64> {
    let s: BTreeSet<u64> = rows
        .iter()
        .filter(|r| r.lib == "cufold")
        .map(|r| r.n)
        .collect();
    s.into_iter().collect()
}

/// The whole markdown report; `img` prefixes the plot file names in the image links.
fn report_md(d: &Data, date: Option<&str>, scan_log2: &[u32], plots: &[&str], img: &str) -> String {
    let mut m = String::new();
    let device = d.device().unwrap_or("unknown device");
    let when = date.map(|d| format!(", measured {d}")).unwrap_or_default();
    let _ = writeln!(m, "**{device}**{when}.\n");
    m += "GB/s counts compulsory traffic: N × element size for a reduction, 2 × N × element \
          size (read + write) for a scan and for `copy`, a device-to-device copy from the same \
          call (the practical bandwidth ceiling). *cufold / best peer* divides cufold's GB/s by \
          the faster of torch and CuPy; *% of copy* divides it by the copy's. `div2mean` is \
          compared with the peers' `mean`. — : not measured, or no such call in that library. \
          Generated by `cargo run -p cufold-report`.\n\n";
    for n in sizes(&d.reduce) {
        let _ = writeln!(m, "### Reductions, N = {}\n", log2_label(n));
        m += &gbs_table(&d.reduce, &d.peers, &[n]);
        m += "\n";
    }
    let scan_ns: Vec<u64> = scan_log2
        .iter()
        .filter(|&&k| k < 64)
        .map(|&k| 1u64 << k)
        .collect();
    if sizes(&d.scan).iter().any(|n| scan_ns.contains(n)) {
        m += "### Scans (GB/s count read + write, as the copy's)\n\n";
        m += &gbs_table(&d.scan, &d.peers_scan, &scan_ns);
        m += "\n";
    }
    if !d.small.is_empty() {
        m += "### Small inputs (µs per call)\n\n";
        m += &small_table(&d.small, &d.peers_small);
        m += "\n";
    }
    if !plots.is_empty() {
        m += "### GB/s against N\n\n";
        for p in plots {
            let _ = writeln!(m, "![{p}]({img}{p}.svg)\n");
        }
    }
    m
}

/// One line of a plot: the best GB/s at each N of one (library, op, dtype).
#[derive(Debug)]
struct Series {
    lib: String,
    op: String,
    dtype: String,
    /// (log2 N, GB/s), ascending in N.
    points: Vec<(f64, f64)>,
}

/// The lines of one plot: each (library, op, dtype) of `rows` with an op in `ops` (cufold
/// first, then the peers, in `ops` order), then the copy of each dtype shown.
fn series(rows: &[Row], ops: &[&str]) -> Vec<Series> {
    let rank = |lib: &str| LIBS.iter().position(|l| *l == lib);
    let keys: BTreeSet<(usize, usize, &str)> = rows
        .iter()
        .filter_map(|r| {
            Some((
                rank(&r.lib)?,
                ops.iter().position(|o| *o == r.op)?,
                r.dtype.as_str(),
            ))
        })
        .collect();
    let dtypes: BTreeSet<&str> = keys.iter().map(|k| k.2).collect();
    let lines = keys
        .into_iter()
        .map(|(lib, op, dtype)| (LIBS[lib], ops[op], dtype));
    let copies = dtypes.into_iter().map(|d| ("copy", "copy", d));
    lines
        .chain(copies)
        .filter_map(|(lib, op, dtype)| {
            let ns: BTreeSet<u64> = rows
                .iter()
                .filter(|r| r.lib == lib && r.op == op && r.dtype == dtype)
                .map(|r| r.n)
                .collect();
            let points: Vec<(f64, f64)> = ns
                .into_iter()
                .filter_map(|n| find(rows, lib, op, dtype, n))
                .filter(|r| r.gbs > 0.0 && r.n > 0)
                .map(|r| ((r.n as f64).log2(), r.gbs))
                .collect();
            let s = Series {
                lib: lib.into(),
                op: op.into(),
                dtype: dtype.into(),
                points,
            };
            (!s.points.is_empty()).then_some(s)
        })
        .collect()
}

/// Draws `series` as an SVG at `path`: GB/s (log) against log2 N.
fn plot(path: &Path, title: &str, series: &[Series]) -> Res<()> {
    let pts = || series.iter().flat_map(|s| s.points.iter().copied());
    let x0 = pts().map(|p| p.0.floor()).fold(10.0, f64::min);
    let x1 = pts().map(|p| p.0.ceil()).fold(30.0, f64::max);
    let y0 = pts().map(|p| p.1).fold(f64::INFINITY, f64::min) * 0.8;
    let y1 = pts().map(|p| p.1).fold(0.0, f64::max) * 1.25;
    let root = SVGBackend::new(path, (960, 620)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 26))
        .margin(14)
        .margin_right(40)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(x0..x1, (y0..y1).log_scale())?;
    chart
        .configure_mesh()
        .x_desc("N (elements)")
        .y_desc("GB/s")
        .x_labels((x1 - x0) as usize / 2 + 1)
        .x_label_formatter(&|x| format!("2^{x:.0}"))
        .y_label_formatter(&|y| {
            if *y >= 1.0 {
                format!("{y:.0}")
            } else {
                format!("{y}")
            }
        })
        .label_style(("sans-serif", 16))
        .axis_desc_style(("sans-serif", 18))
        .draw()?;
    let mut colours: Vec<(&str, &str)> = Vec::new();
    let mut copies = 0;
    for s in series {
        let key = (s.op.as_str(), s.dtype.as_str());
        let i = colours.iter().position(|k| *k == key).unwrap_or_else(|| {
            colours.push(key);
            colours.len() - 1
        });
        let colour = PALETTE[i % PALETTE.len()];
        let label = format!("{} {} {}", s.lib, s.op, s.dtype);
        let p = s.points.clone();
        match s.lib.as_str() {
            "copy" => {
                // One grey and dash length per dtype, darkest first.
                let grey = [110, 150, 70, 180][copies % 4];
                let dash = 8 + 4 * (copies % 4) as u32;
                copies += 1;
                let style = RGBColor(grey, grey, grey).stroke_width(2);
                chart
                    .draw_series(DashedLineSeries::new(p, dash, 5, style))?
                    .label(format!("copy {} (read + write)", s.dtype))
                    .legend(move |(x, y)| {
                        DashedPathElement::new([(x, y), (x + 24, y)], dash / 2, 3, style)
                    });
            }
            "cufold" => {
                let style = colour.stroke_width(3);
                chart
                    .draw_series(LineSeries::new(p, style).point_size(3))?
                    .label(label)
                    .legend(move |(x, y)| PathElement::new([(x, y), (x + 24, y)], style));
            }
            lib => {
                let style = colour.stroke_width(1);
                let torch = lib == "torch";
                chart
                    .draw_series(LineSeries::new(p.clone(), style))?
                    .label(label)
                    .legend(move |(x, y)| {
                        EmptyElement::at((x + 12, y))
                            + PathElement::new([(-12, 0), (12, 0)], style)
                            + marker(torch, (0, 0), style)
                    });
                chart.draw_series(p.into_iter().map(|c| marker(torch, c, style)))?;
            }
        }
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 16))
        .draw()?;
    drop(chart);
    root.present()?;
    Ok(())
}

/// A peer's point marker: a triangle for torch, a cross for CuPy.
fn marker<DB: DrawingBackend, C: Clone + 'static>(
    torch: bool,
    c: C,
    style: ShapeStyle,
) -> DynElement<'static, DB, C> {
    if torch {
        TriangleMarker::new(c, 4, style).into_dyn()
    } else {
        Cross::new(c, 4, style).into_dyn()
    }
}

/// Draws every plot that has data into `out`; returns the names drawn.
fn plots(d: &Data, out: &Path) -> Res<Vec<&'static str>> {
    let device = d.device().unwrap_or("unknown device");
    let mut drawn = Vec::new();
    for (name, ops) in PLOTS {
        let (mine, peers) = match name {
            "scans" => (&d.scan, &d.peers_scan),
            _ => (&d.sweep, &d.peers_sweep),
        };
        let rows: Vec<Row> = mine.iter().chain(peers).cloned().collect();
        let lines = series(&rows, ops);
        if lines.iter().all(|s| s.lib == "copy") {
            eprintln!("note: no data for the {name} plot, skipped");
            continue;
        }
        let path = out.join(format!("{name}.svg"));
        plot(&path, &format!("{name}: GB/s against N, {device}"), &lines)?;
        eprintln!("wrote {}", path.display());
        drawn.push(name);
    }
    Ok(drawn)
}

/// `doc` with the text between the marker lines replaced by `content` (markers appended at
/// the end when absent).
fn splice(doc: &str, content: &str) -> String {
    if let Some(b) = doc.find(BEGIN) {
        let after = b + BEGIN.len();
        if let Some(e) = doc[after..].find(END) {
            return format!("{}\n{content}{}", &doc[..after], &doc[after + e..]);
        }
    }
    let sep = if doc.is_empty() { "" } else { "\n\n" };
    format!("{}{sep}{BEGIN}\n{content}{END}\n", doc.trim_end())
}

/// The prefix of `out` relative to the directory of `file` (`docs/bench/`), for image links.
fn link_prefix(file: &Path, out: &Path) -> String {
    let base = match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let (base, out) = (base.canonicalize(), out.canonicalize());
    match (&base, &out) {
        (Ok(b), Ok(o)) => match o.strip_prefix(b) {
            Ok(rel) if rel.as_os_str().is_empty() => String::new(),
            Ok(rel) => {
                let parts: Vec<_> = rel.iter().map(|c| c.to_string_lossy()).collect();
                format!("{}/", parts.join("/"))
            }
            Err(_) => format!("{}/", o.display()),
        },
        _ => "docs/bench/".into(),
    }
}

/// The repository root: the parent of this crate, or the current directory.
fn repo_root() -> PathBuf {
    match Path::new(env!("CARGO_MANIFEST_DIR")).parent() {
        Some(p) if p.join("Cargo.toml").is_file() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Loads, draws, writes and prints everything.
fn run(a: Args) -> Res<()> {
    if !a.dir.is_dir() {
        return Err(format!("{} is not a directory", a.dir.display()).into());
    }
    let d = Data::load(&a.dir);
    let out = a
        .out
        .unwrap_or_else(|| repo_root().join("docs").join("bench"));
    std::fs::create_dir_all(&out)?;
    let drawn = plots(&d, &out)?;
    let date = a.date.as_deref();
    let md = report_md(&d, date, &a.scan_log2, &drawn, "");
    let path = out.join("tables.md");
    std::fs::write(&path, &md)?;
    eprintln!("wrote {}", path.display());
    print!("{md}");
    if let Some(file) = a.benchmarks {
        let doc = match std::fs::read_to_string(&file) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(format!("{}: {e}", file.display()).into()),
        };
        if !doc.contains(BEGIN) || !doc.contains(END) {
            eprintln!("note: no report markers in {}, appended", file.display());
        }
        let md = report_md(&d, date, &a.scan_log2, &drawn, &link_prefix(&file, &out));
        std::fs::write(&file, splice(&doc, &md))?;
        eprintln!("updated {}", file.display());
    }
    Ok(())
}

fn main() -> ExitCode {
    let usage = "usage: cufold-report DIR [--date TEXT] [--benchmarks FILE] [--out DIR] \
                 [--scan-log2 20,24,28]";
    match parse_args(std::env::args().skip(1)) {
        Ok(None) => {
            println!("{usage}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("cufold-report: {e}\n{usage}");
            ExitCode::from(2)
        }
        Ok(Some(a)) => match run(a) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("cufold-report: {e}");
                ExitCode::FAILURE
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(lib: &str, op: &str, dtype: &str, n: u64, gbs: f64) -> Row {
        Row {
            lib: lib.into(),
            op: op.into(),
            dtype: dtype.into(),
            n,
            ms: 1.0,
            gbs,
            checked: None,
            device: Some("GPU".into()),
        }
    }

    #[test]
    fn log2_and_numbers() {
        assert_eq!(log2_label(1 << 24), "2^24");
        assert_eq!(log2_label(1000), "1000");
        assert_eq!(
            (num(2024.4), num(38.46), num(4.171)),
            ("2024".into(), "38.5".into(), "4.17".into())
        );
    }

    #[test]
    fn best_peer_maps_div2mean_and_skips_missing() {
        let n = 1 << 24;
        let peers = [
            row("torch", "mean", "f32", n, 1500.0),
            row("cupy", "mean", "f32", n, 1700.0),
        ];
        assert_eq!(best_peer(&peers, "div2mean", "f32", n).unwrap().lib, "cupy");
        assert!(best_peer(&peers, "meanvar", "f32", n).is_none());
        assert!(best_peer(&peers, "mean", "bf16", n).is_none());
    }

    #[test]
    fn table_rows() {
        let n = 1 << 24;
        let cufold = [
            row("cufold", "div2mean", "f32", n, 2000.0),
            row("cufold", "minmax", "bf16", n, 900.0),
        ];
        let peers = [
            row("torch", "mean", "f32", n, 1000.0),
            row("copy", "copy", "f32", n, 2500.0),
            row("torch", "minmax", "bf16", n, 1200.0),
        ];
        let t = gbs_table(&cufold, &peers, &[n]);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 4);
        assert_eq!(
            lines[2],
            "| div2mean (vs mean) | f32 | 2^24 | 2000 | 1000 | — | 2500 | 2.00 | 80% |"
        );
        assert_eq!(
            lines[3],
            "| minmax | bf16 | 2^24 | 900 | 1200 | — | — | 0.75 | — |"
        );
        assert!(gbs_table(&cufold, &peers, &[1 << 28]).lines().count() == 2);
    }

    #[test]
    fn parse_skips_incomplete_rows() {
        let (rows, skipped) = parse_rows(
            r#"[{"lib":"cufold","op":"sum","dtype":"f32","n":1024,"ms":0.01,"gbs":0.4,"checked":null},
                {"lib":"cufold","op":"sum"}]"#,
        )
        .unwrap();
        assert_eq!((rows.len(), skipped, rows[0].checked), (1, 1, None));
        assert!(parse_rows("{}").is_err());
    }

    #[test]
    fn splice_replaces_or_appends() {
        let doc = format!("a\n{BEGIN}\nold\n{END}\nb\n");
        assert_eq!(
            splice(&doc, "new\n"),
            format!("a\n{BEGIN}\nnew\n{END}\nb\n")
        );
        assert_eq!(
            splice("a\n", "new\n"),
            format!("a\n\n{BEGIN}\nnew\n{END}\n")
        );
    }

    #[test]
    fn series_per_lib_op_dtype_and_copy() {
        let rows = [
            row("cufold", "sum", "f32", 1 << 10, 1.0),
            row("cufold", "sum", "f32", 1 << 12, 4.0),
            row("torch", "sum", "f32", 1 << 10, 0.5),
            row("copy", "copy", "f32", 1 << 10, 2.0),
            row("copy", "copy", "f64", 1 << 10, 2.0),
            row("cufold", "max", "f32", 1 << 10, 1.0),
        ];
        let s = series(&rows, &["sum", "mean"]);
        let names: Vec<String> = s
            .iter()
            .map(|s| format!("{} {} {}", s.lib, s.op, s.dtype))
            .collect();
        assert_eq!(names, ["cufold sum f32", "torch sum f32", "copy copy f32"]);
        assert_eq!(s[0].points, [(10.0, 1.0), (12.0, 4.0)]);
    }
}
