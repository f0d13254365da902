//! Minimal Markdown table rendering for the harness reports, padded so the tables also read
//! well as plain text in a terminal.

/// Renders a table; `right_align[i]` right-aligns column `i` (numbers).
pub fn table(header: &[&str], right_align: &[bool], rows: &[Vec<String>]) -> String {
    let cols = header.len();
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|row| row.iter().map(|c| escape(c)).collect())
        .collect();
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count().max(3)).collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let right = |i: usize| right_align.get(i).copied().unwrap_or(false);
    let line = |cells: Vec<String>| -> String {
        let padded: Vec<String> = (0..cols)
            .map(|i| {
                let cell = cells.get(i).map(String::as_str).unwrap_or("");
                if right(i) {
                    format!("{cell:>w$}", w = widths[i])
                } else {
                    format!("{cell:<w$}", w = widths[i])
                }
            })
            .collect();
        format!("| {} |\n", padded.join(" | "))
    };

    let mut out = line(header.iter().map(|h| h.to_string()).collect());
    let rule: Vec<String> = (0..cols)
        .map(|i| {
            let dashes = "-".repeat(widths[i].saturating_sub(1));
            if right(i) {
                format!("{dashes}:")
            } else {
                format!("{dashes}-")
            }
        })
        .collect();
    out.push_str(&format!("| {} |\n", rule.join(" | ")));
    for row in rows {
        out.push_str(&line(row));
    }
    out
}

/// A `|` inside a cell would split it into two columns.
fn escape(cell: &str) -> String {
    cell.replace('|', "\\|")
}
