//! Line and bar plots for the bench reports (thread scaling, cost against image size, growth
//! per corruption type), each written as SVG and PNG.
//!
//! Drawn with `plotters`' SVG and bitmap backends. Text is measured (and, for PNG, rasterised)
//! with `ab_glyph` from DejaVu Sans Mono embedded in the binary (assets/, Bitstream Vera
//! licence, redistributable unmodified), so neither building nor running needs system fonts,
//! fontconfig or C libraries. Figures are rendered in memory first so a failed draw never
//! leaves a half-written file behind.
//!
//! Input comes from measurements that may be NaN (a checker that never ran) or absurd; points
//! that are not finite are dropped, and a plot with no finite point left is an error rather
//! than an empty or broken picture.

use std::path::Path;

use anyhow::{bail, Context, Result};
use plotters::coord::Shift;
use plotters::prelude::*;
use serde::Serialize;

/// The font every figure uses, registered with plotters once.
static FONT: &[u8] = include_bytes!("../assets/DejaVuSansMono.ttf");

fn ensure_font() -> Result<()> {
    static REGISTERED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let ok = *REGISTERED.get_or_init(|| {
        plotters::style::register_font("sans-serif", FontStyle::Normal, FONT).is_ok()
    });
    if !ok {
        bail!("the embedded font could not be loaded");
    }
    Ok(())
}

/// Pixel size of every figure; wide enough for a legend beside four or five series.
const SIZE_PX: (u32, u32) = (720, 450);

/// Most points kept per series: a bound on what a hostile results.json can make us draw.
const MAX_POINTS: usize = 10_000;

/// One named line of `(x, y)` points.
#[derive(Debug, Clone)]
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
    /// Draw as a dashed reference line without point markers (e2fsck's flat line).
    pub reference: bool,
}

/// A line chart: title, axis labels and its series, drawn in order.
#[derive(Debug, Clone)]
pub struct LinePlot {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<Series>,
    /// x is a count (threads): label whole numbers only.
    pub x_integer: bool,
}

/// Largest magnitude drawn. No time or size we measure comes near it, and plotters' tick
/// search does not finish on ranges near `f64::MAX` (found by the hostile-input test).
const MAX_ABS_VALUE: f64 = 1e15;

/// The finite, drawable points of a series, sorted by x so the line does not zigzag back.
fn clean(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut out: Vec<(f64, f64)> = points
        .iter()
        .copied()
        .filter(|(x, y)| x.abs() <= MAX_ABS_VALUE && y.abs() <= MAX_ABS_VALUE)
        .take(MAX_POINTS)
        .collect();
    out.sort_by(|a, b| a.0.total_cmp(&b.0));
    out
}

/// `[lo, hi]` widened so a single value or a flat line still gets a visible axis; `from_zero`
/// keeps 0 in the range (times and memory read best against zero).
fn axis_range(values: impl Iterator<Item = f64>, from_zero: bool) -> (f64, f64) {
    let (mut lo, mut hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    });
    if from_zero {
        lo = lo.min(0.0);
        hi = hi.max(0.0);
    }
    let span = hi - lo;
    // A zero, vanishing or overflowing span cannot be divided into ticks.
    let scale = lo.abs().max(hi.abs()).max(1e-12);
    if !(span.is_finite() && span > scale * 1e-9) {
        let pad = if hi.is_finite() && hi != 0.0 {
            hi.abs() * 0.1
        } else {
            1.0
        };
        return (
            (lo - pad).max(-f64::MAX / 4.0),
            (hi + pad).min(f64::MAX / 4.0),
        );
    }
    let pad = span * 0.05;
    // y (the `from_zero` axis) gets extra room on top so the legend box does not hide the
    // highest line.
    let top = if from_zero { span * 0.3 } else { pad };
    (if from_zero && lo >= 0.0 { lo } else { lo - pad }, hi + top)
}

/// Draws the line plot onto any plotters backend.
fn draw_line<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, plot: &LinePlot) -> Result<()> {
    ensure_font()?;
    let series: Vec<(&Series, Vec<(f64, f64)>)> =
        plot.series.iter().map(|s| (s, clean(&s.points))).collect();
    let all = || series.iter().flat_map(|(_, p)| p.iter().copied());
    if all().next().is_none() {
        bail!("plot `{}` has no finite data point to draw", plot.title);
    }
    let x_range = axis_range(all().map(|p| p.0), false);
    let y_range = axis_range(all().map(|p| p.1), true);

    let draw =
        |e: DrawingAreaErrorKind<DB::ErrorType>| anyhow::anyhow!("drawing `{}`: {e}", plot.title);
    root.fill(&WHITE).map_err(draw)?;
    let mut chart = ChartBuilder::on(root)
        .caption(&plot.title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(64)
        .build_cartesian_2d(x_range.0..x_range.1, y_range.0..y_range.1)
        .map_err(draw)?;
    let mut mesh = chart.configure_mesh();
    let whole = |x: &f64| {
        if x.fract() == 0.0 {
            format!("{x:.0}")
        } else {
            String::new()
        }
    };
    if plot.x_integer {
        // One tick per whole number when there are few, so "1.5 threads" never shows.
        let ticks = (x_range.1 - x_range.0).clamp(1.0, 20.0) as usize + 1;
        mesh.x_labels(ticks).x_label_formatter(&whole);
    }
    mesh.x_desc(plot.x_label.as_str())
        .y_desc(plot.y_label.as_str())
        .draw()
        .map_err(draw)?;
    for (i, (s, points)) in series.iter().enumerate() {
        if points.is_empty() {
            continue;
        }
        let color = Palette99::pick(i).to_rgba();
        let style = color.stroke_width(2);
        if s.reference {
            chart
                .draw_series(DashedLineSeries::new(points.iter().copied(), 8, 5, style))
                .map_err(draw)?
                .label(s.label.as_str())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
        } else {
            chart
                .draw_series(LineSeries::new(points.iter().copied(), style))
                .map_err(draw)?
                .label(s.label.as_str())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
            chart
                .draw_series(
                    points
                        .iter()
                        .map(|&p| Circle::new(p, 4, color.filled()).into_dyn()),
                )
                .map_err(draw)?;
        }
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(draw)?;
    root.present().map_err(draw)?;
    Ok(())
}

/// Renders the plot as an SVG document.
pub fn render_svg(plot: &LinePlot) -> Result<String> {
    render_svg_with(SIZE_PX, |root| draw_line(root, plot))
}

fn render_svg_with(
    size: (u32, u32),
    f: impl FnOnce(&DrawingArea<SVGBackend<'_>, Shift>) -> Result<()>,
) -> Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        f(&root)?;
    }
    Ok(svg)
}

/// Renders a figure as PNG bytes.
fn render_png_with(
    size: (u32, u32),
    f: impl FnOnce(&DrawingArea<BitMapBackend<'_>, Shift>) -> Result<()>,
) -> Result<Vec<u8>> {
    let (w, h) = size;
    let mut rgb = vec![0u8; (w * h * 3) as usize];
    {
        let root = BitMapBackend::with_buffer(&mut rgb, size).into_drawing_area();
        f(&root)?;
    }
    let img = image_rgb(w, h, rgb)?;
    Ok(img)
}

/// Encodes an RGB buffer as PNG.
fn image_rgb(w: u32, h: u32, rgb: Vec<u8>) -> Result<Vec<u8>> {
    use image::{codecs::png::PngEncoder, ColorType, ImageEncoder};
    let mut out = Vec::new();
    PngEncoder::new(&mut out)
        .write_image(&rgb, w, h, ColorType::Rgb8)
        .context("encoding PNG")?;
    Ok(out)
}

/// Renders the line plot as PNG bytes.
pub fn render_png(plot: &LinePlot) -> Result<Vec<u8>> {
    render_png_with(SIZE_PX, |root| draw_line(root, plot))
}

/// Renders the plot and writes it to `path` (nothing is written when drawing fails).
pub fn write_svg(plot: &LinePlot, path: &Path) -> Result<()> {
    let svg = render_svg(plot)?;
    std::fs::write(path, svg).with_context(|| format!("writing {}", path.display()))
}

/// Any figure this module draws.
pub enum Plot<'a> {
    Line(&'a LinePlot),
    Bar(&'a BarPlot),
}

impl Plot<'_> {
    pub fn title(&self) -> &str {
        match self {
            Plot::Line(p) => &p.title,
            Plot::Bar(p) => &p.title,
        }
    }
}

/// Writes `DIR/STEM.svg` and `DIR/STEM.png`; both are rendered before either is written.
/// Returns the two file names.
pub fn write_figure(plot: Plot<'_>, dir: &Path, stem: &str) -> Result<(String, String)> {
    let (svg, png) = match plot {
        Plot::Line(p) => (render_svg(p)?, render_png(p)?),
        Plot::Bar(p) => {
            // About 30 pixels per category, so two bars and a label always fit.
            let n = p.categories.len().min(MAX_CATEGORIES) as u32;
            let size = (SIZE_PX.0, SIZE_PX.1.max(120 + 30 * n));
            (
                render_svg_with(size, |root| draw_bars(root, p))?,
                render_png_with(size, |root| draw_bars(root, p))?,
            )
        }
    };
    let (svg_name, png_name) = (format!("{stem}.svg"), format!("{stem}.png"));
    for (name, bytes) in [(&svg_name, svg.as_bytes()), (&png_name, &png[..])] {
        let path = dir.join(name);
        std::fs::write(&path, bytes).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok((svg_name, png_name))
}

/// Horizontal grouped bars: one group per category (read top to bottom), one bar per series.
#[derive(Debug, Clone)]
pub struct BarPlot {
    pub title: String,
    /// What the bar length means.
    pub x_label: String,
    pub categories: Vec<String>,
    /// (label, one value per category; NaN where there is none).
    pub series: Vec<(String, Vec<f64>)>,
    /// Draw a dashed vertical reference line here (e.g. 1.0 for "no growth").
    pub reference: Option<f64>,
}

/// Most categories drawn: a bound on the figure's height.
const MAX_CATEGORIES: usize = 64;

fn draw_bars<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, plot: &BarPlot) -> Result<()> {
    ensure_font()?;
    let cats = &plot.categories[..plot.categories.len().min(MAX_CATEGORIES)];
    let value = |v: f64| (v.is_finite() && v.abs() <= MAX_ABS_VALUE).then_some(v);
    let values = plot
        .series
        .iter()
        .flat_map(|(_, vs)| vs.iter().take(cats.len()).filter_map(|&v| value(v)))
        .chain(plot.reference);
    let mut values = values.peekable();
    if cats.is_empty() || values.peek().is_none() {
        bail!("plot `{}` has no finite bar to draw", plot.title);
    }
    let (lo, hi) = axis_range(values, true);
    let n = cats.len() as f64;
    let draw =
        |e: DrawingAreaErrorKind<DB::ErrorType>| anyhow::anyhow!("drawing `{}`: {e}", plot.title);
    root.fill(&WHITE).map_err(draw)?;
    let longest = cats.iter().map(|c| c.chars().count()).max().unwrap_or(1) as u32;
    let mut chart = ChartBuilder::on(root)
        .caption(&plot.title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size((longest * 8 + 16).min(260))
        .build_cartesian_2d(lo..hi, 0.0..n)
        .map_err(draw)?;
    // Category k occupies y in [n-k-1, n-k): the first category is at the top.
    let names = cats.to_vec();
    let label = move |y: &f64| {
        let k = (n - y - 0.5).round();
        if (y.fract() - 0.5).abs() < 1e-6 && k >= 0.0 && (k as usize) < names.len() {
            names[k as usize].clone()
        } else {
            String::new()
        }
    };
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(cats.len() * 2 + 1)
        .y_label_formatter(&label)
        .x_desc(plot.x_label.as_str())
        .label_style(("sans-serif", 12))
        .draw()
        .map_err(draw)?;
    let groups = plot.series.len().max(1) as f64;
    let bar = 0.8 / groups;
    for (i, (name, vs)) in plot.series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let rects: Vec<_> = vs
            .iter()
            .take(cats.len())
            .enumerate()
            .filter_map(|(k, &v)| {
                let v = value(v)?;
                let top = n - k as f64 - 0.1 - bar * i as f64;
                Some(Rectangle::new(
                    [(0.0_f64.max(lo), top - bar), (v, top)],
                    color.filled(),
                ))
            })
            .collect();
        chart
            .draw_series(rects)
            .map_err(draw)?
            .label(name.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], color.filled()));
    }
    if let Some(r) = plot.reference {
        chart
            .draw_series(DashedLineSeries::new(
                [(r, 0.0), (r, n)],
                6,
                4,
                BLACK.stroke_width(1),
            ))
            .map_err(draw)?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::LowerRight)
        .draw()
        .map_err(draw)?;
    root.present().map_err(draw)?;
    Ok(())
}

/// Thread-scaling figure: ffsck's median wall per thread count, e2fsck as a flat reference.
pub fn scaling_plot(scaling: &[(usize, f64)], e2fsck_wall_s: f64, what: &str) -> LinePlot {
    let ffsck: Vec<(f64, f64)> = scaling.iter().map(|&(t, w)| (t as f64, w)).collect();
    let (lo, hi) = ffsck
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), p| {
            (lo.min(p.0), hi.max(p.0))
        });
    let mut series = vec![Series {
        label: "ffsck -fn".into(),
        points: ffsck,
        reference: false,
    }];
    if lo.is_finite() && hi.is_finite() {
        series.push(Series {
            label: "e2fsck -fn (single-threaded)".into(),
            points: vec![(lo, e2fsck_wall_s), (hi, e2fsck_wall_s)],
            reference: true,
        });
    }
    LinePlot {
        title: format!("Thread scaling: {what}"),
        x_label: "ffsck threads".into(),
        y_label: "median wall time (s)".into(),
        series,
        x_integer: true,
    }
}

/// One point of a size sweep, per checker.
#[derive(Debug, Clone, Copy)]
pub struct SizePoint {
    pub inodes: f64,
    pub ffsck: f64,
    pub e2fsck: f64,
}

/// Cost-against-size figure: one line per checker of `y` (wall seconds or peak MiB) by inodes.
pub fn size_plot(points: &[SizePoint], title: &str, y_label: &str) -> LinePlot {
    let pick = |f: fn(&SizePoint) -> f64| points.iter().map(|p| (p.inodes, f(p))).collect();
    LinePlot {
        title: title.into(),
        x_label: "inodes in use".into(),
        y_label: y_label.into(),
        series: vec![
            Series {
                label: "ffsck -fn".into(),
                points: pick(|p| p.ffsck),
                reference: false,
            },
            Series {
                label: "e2fsck -fn".into(),
                points: pick(|p| p.e2fsck),
                reference: false,
            },
        ],
        x_integer: false,
    }
}

/// A figure written beside report.md as SVG (`file`) and PNG (`png`), relative to the report.
#[derive(Debug, Clone, Serialize)]
pub struct Figure {
    pub title: String,
    pub file: String,
    pub png: String,
}

impl Figure {
    /// Writes `out/STEM.svg` and `out/STEM.png`.
    pub fn write(plot: Plot<'_>, out: &Path, stem: &str) -> Result<Figure> {
        let title = plot.title().to_string();
        let (file, png) = write_figure(plot, out, stem)?;
        Ok(Figure { title, file, png })
    }
}

/// Markdown links (and inline images) for the figures.
pub fn render_figures(figures: &[Figure]) -> String {
    if figures.is_empty() {
        return String::new();
    }
    let mut out = String::from("\n### Figures\n\n");
    for f in figures {
        out.push_str(&format!(
            "- [{t}]({file}) ([PNG]({png}))\n\n  ![{t}]({file})\n",
            t = f.title.replace(['[', ']'], ""),
            file = f.file,
            png = f.png
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axis_ranges_survive_degenerate_input() {
        assert_eq!(axis_range([2.0].into_iter(), false), (1.8, 2.2));
        assert_eq!(axis_range([0.0].into_iter(), true), (-1.0, 1.0));
        let (lo, hi) = axis_range([-f64::MAX, f64::MAX].into_iter(), false);
        assert!(lo.is_finite() && hi.is_finite() && lo < hi);
        let (lo, hi) = axis_range([1.0, 3.0].into_iter(), true);
        assert_eq!(lo, 0.0);
        assert!(hi > 3.5);
    }

    #[test]
    fn clean_drops_non_finite_and_sorts() {
        let p = clean(&[
            (3.0, 1.0),
            (f64::NAN, 1.0),
            (1.0, f64::INFINITY),
            (2.0, 5.0),
        ]);
        assert_eq!(p, [(2.0, 5.0), (3.0, 1.0)]);
    }
}
