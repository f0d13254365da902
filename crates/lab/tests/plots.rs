//! The bench's SVG writer: its output must be a well-formed SVG document holding every finite
//! data point, hostile numbers must not panic it, and it must fail (writing nothing) when there
//! is nothing to draw or nowhere to write.

use ffsck_lab::plots::{self, LinePlot, Series, SizePoint};

/// Minimal XML well-formedness check (no XML crate is vendored here): every tag closes in
/// order, attributes quote, and there is exactly one root element, `<svg>`.
fn check_xml(doc: &str) -> Result<String, String> {
    let mut stack: Vec<String> = Vec::new();
    let mut root = None;
    let mut rest = doc;
    while let Some(open) = rest.find('<') {
        let text = &rest[..open];
        if stack.is_empty() && !text.trim().is_empty() {
            return Err(format!("text outside the root: {text:?}"));
        }
        if text.contains('>') {
            return Err(format!("stray `>` in text {text:?}"));
        }
        let after = &rest[open + 1..];
        if let Some(body) = after.strip_prefix("!--") {
            let end = body.find("-->").ok_or("unclosed comment")?;
            rest = &body[end + 3..];
            continue;
        }
        if let Some(body) = after.strip_prefix('?') {
            let end = body.find("?>").ok_or("unclosed declaration")?;
            rest = &body[end + 2..];
            continue;
        }
        // Find the end of the tag outside quoted attribute values.
        let mut quote = None;
        let mut close = None;
        for (i, c) in after.char_indices() {
            match (quote, c) {
                (None, '"' | '\'') => quote = Some(c),
                (Some(q), c) if c == q => quote = None,
                (None, '<') => return Err("`<` inside a tag".into()),
                (None, '>') => {
                    close = Some(i);
                    break;
                }
                _ => {}
            }
        }
        let close = close.ok_or("unclosed tag")?;
        let tag = &after[..close];
        rest = &after[close + 1..];
        if let Some(name) = tag.strip_prefix('/') {
            match stack.pop() {
                Some(open) if open == name.trim() => {}
                other => return Err(format!("</{name}> closes {other:?}")),
            }
            continue;
        }
        let name: String = tag
            .chars()
            .take_while(|c| !c.is_whitespace() && *c != '/')
            .collect();
        if name.is_empty() {
            return Err(format!("tag without a name: <{tag}>"));
        }
        if stack.is_empty() {
            if root.is_some() {
                return Err(format!("second root element <{name}>"));
            }
            root = Some(name.clone());
        }
        if !tag.ends_with('/') {
            stack.push(name);
        }
    }
    if !rest.trim().is_empty() || !stack.is_empty() {
        return Err(format!("unclosed elements {stack:?}"));
    }
    root.ok_or_else(|| "no root element".into())
}

fn plot(points: Vec<(f64, f64)>) -> LinePlot {
    LinePlot {
        title: "t <&> \"q\"".into(),
        x_label: "x".into(),
        y_label: "y".into(),
        series: vec![Series {
            label: "ffsck -fn".into(),
            points,
            reference: false,
        }],
        x_integer: false,
    }
}

#[test]
fn checker_rejects_broken_xml() {
    assert!(check_xml("<svg><g></svg></g>").is_err());
    assert!(check_xml("<svg></svg><svg/>").is_err());
    assert!(check_xml("<svg a=\"x>\">").is_err());
    assert_eq!(check_xml("<?xml x?><svg a='>'><g/></svg>").unwrap(), "svg");
}

#[test]
fn scaling_plot_is_svg_with_every_point() {
    let p = plots::scaling_plot(&[(1, 4.0), (2, 2.2), (3, 1.6), (4, 1.3)], 5.0, "files");
    let svg = plots::render_svg(&p).unwrap();
    assert_eq!(check_xml(&svg).unwrap(), "svg");
    // One marker per ffsck point; e2fsck's reference line has none.
    assert_eq!(svg.matches("<circle").count(), 4, "{svg}");
    assert!(svg.contains("ffsck -fn") && svg.contains("e2fsck -fn"));
    assert!(svg.contains("Thread scaling: files"));
    // Whole thread counts only on the x axis.
    assert!(!svg.contains(">\n1.5\n<"), "{svg}");
}

#[test]
fn size_plot_writes_a_file() {
    let pts = [
        SizePoint {
            inodes: 100_000.0,
            ffsck: 0.5,
            e2fsck: 1.5,
        },
        SizePoint {
            inodes: 1_000_000.0,
            ffsck: 4.0,
            e2fsck: 15.0,
        },
    ];
    let p = plots::size_plot(&pts, "Wall time by size", "s");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sizes.svg");
    plots::write_svg(&p, &path).unwrap();
    let svg = std::fs::read_to_string(&path).unwrap();
    assert_eq!(check_xml(&svg).unwrap(), "svg");
    assert_eq!(svg.matches("<circle").count(), 4);
}

#[test]
fn hostile_values_are_dropped_not_drawn() {
    let p = plot(vec![
        (f64::NAN, 1.0),
        (1.0, f64::INFINITY),
        (2.0, 3.0),
        (f64::MAX, -f64::MAX),
        (-0.0, 1e300),
        (5.0, 1e-300),
    ]);
    let svg = plots::render_svg(&p).unwrap();
    assert_eq!(check_xml(&svg).unwrap(), "svg");
    // Non-finite and astronomically large points are dropped.
    assert_eq!(svg.matches("<circle").count(), 2);
    // A flat or vanishing range still renders.
    for pts in [vec![(1.0, 1.0), (1.0, 1.0 + 1e-15)], vec![(1e-300, 1e-300)]] {
        let svg = plots::render_svg(&plot(pts)).unwrap();
        assert_eq!(check_xml(&svg).unwrap(), "svg");
    }
    // Escaped, not raw, markup characters from the title.
    assert!(!svg.contains("t <&>"));
}

#[test]
fn nothing_to_draw_is_an_error_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("empty.svg");
    for p in [
        plot(vec![]),
        plot(vec![(f64::NAN, f64::NAN)]),
        LinePlot {
            series: vec![],
            ..plot(vec![])
        },
    ] {
        let err = plots::write_svg(&p, &path).unwrap_err();
        assert!(err.to_string().contains("no finite data point"), "{err}");
        assert!(!path.exists());
    }
    // An unwritable destination is an error too.
    let bad = dir.path().join("missing-dir").join("x.svg");
    assert!(plots::write_svg(&plot(vec![(1.0, 1.0)]), &bad).is_err());
}
