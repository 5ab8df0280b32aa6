//! The house table: every table the command line prints for people (a run's report,
//! `simulate`, `calibrate`, `bench-model`, `tune`, `list`, a sweep on a terminal) is made
//! here, box-drawn the same way. On a terminal it is arranged to the terminal's width
//! (comfy-table's dynamic arrangement wraps the widest cells, between words only, so a
//! number or a name is never cut); anywhere else (a pipe, a file, a page of the book, a
//! test) every cell keeps one line.

use comfy_table::{
    Cell, CellAlignment, ColumnConstraint, ContentArrangement, Table, Width, presets::UTF8_FULL_CONDENSED,
};

/// How wide a table may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fit {
    /// The terminal's width when standard output is one; else as wide as the cells.
    Terminal,
    /// As wide as the cells, whatever standard output is (for files and pages).
    Natural,
    /// At most this many columns (cells wrap to fit, as far as their words allow): what
    /// a terminal of that width gets.
    #[cfg_attr(not(test), expect(dead_code, reason = "the tests fit tables to widths of their own"))]
    Columns(u16),
}

/// A table of the house style: a header, rows, some columns aligned right.
#[derive(Debug, Clone)]
pub struct HouseTable {
    table: Table,
    /// The longest word of each column so far, in characters: its cells wrap no narrower.
    longest_words: Vec<usize>,
}

impl HouseTable {
    /// An empty table under `header`.
    pub fn new<T: ToString>(header: impl IntoIterator<Item = T>) -> Self {
        let mut table = HouseTable { table: Table::new(), longest_words: Vec::new() };
        let header = table.words_seen(header);
        table.table.load_preset(UTF8_FULL_CONDENSED).set_header(header);
        table
    }

    /// Adds a row below the others.
    pub fn row<T: ToString>(&mut self, cells: impl IntoIterator<Item = T>) -> &mut Self {
        let cells = self.words_seen(cells);
        self.table.add_row(cells);
        self
    }

    /// The cells of a row, their longest words noted.
    fn words_seen<T: ToString>(&mut self, cells: impl IntoIterator<Item = T>) -> Vec<Cell> {
        let texts: Vec<String> = cells.into_iter().map(|cell| cell.to_string()).collect();
        for (column, text) in texts.iter().enumerate() {
            let longest = text.split_whitespace().map(|word| word.chars().count()).max().unwrap_or(0);
            if column >= self.longest_words.len() {
                self.longest_words.resize(column + 1, 0);
            }
            self.longest_words[column] = self.longest_words[column].max(longest);
        }
        texts.into_iter().map(Cell::new).collect()
    }

    /// Aligns the cells of `columns` (0 the first) to the right, as numbers are.
    pub fn right_aligned(&mut self, columns: &[usize]) -> &mut Self {
        for &column in columns {
            if let Some(column) = self.table.column_mut(column) {
                column.set_cell_alignment(CellAlignment::Right);
            }
        }
        self
    }

    /// The table as text, `width` wide at most.
    pub fn render(&self, fit: Fit) -> String {
        let mut table = self.table.clone();
        match fit {
            Fit::Terminal => {
                table.set_content_arrangement(ContentArrangement::Dynamic);
            }
            Fit::Natural => {
                table.force_no_tty().set_content_arrangement(ContentArrangement::Disabled);
            }
            Fit::Columns(columns) => {
                table.force_no_tty().set_width(columns).set_content_arrangement(ContentArrangement::Dynamic);
            }
        }
        // A cell wraps between words: a column is never narrower than its longest word
        // and the padding either side.
        let padding = 2;
        let constraints = self.longest_words.iter().map(|&longest| {
            ColumnConstraint::LowerBoundary(Width::Fixed(u16::try_from(longest + padding).unwrap_or(u16::MAX)))
        });
        table.set_constraints(constraints);
        table.to_string()
    }
}

/// The table for standard output: arranged to the terminal when it is one.
impl std::fmt::Display for HouseTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.render(Fit::Terminal))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wide() -> HouseTable {
        let mut table = HouseTable::new(["topology", "p", "algorithm", "time µs", "closed form µs", "busiest link"]);
        table.row(["torus 64x64", "4096", "recursive-doubling", "90155.520", "90155.520", "0→1 164 KiB"]);
        table.row(["ring", "8", "ring", "1.000", "-", "0→1 8 B"]);
        table
    }

    fn widest_line(text: &str) -> usize {
        text.lines().map(|line| line.chars().count()).max().unwrap_or(0)
    }

    #[test]
    fn a_table_wider_than_the_width_is_arranged_to_it_between_words() {
        let natural = wide().render(Fit::Natural);
        assert!(widest_line(&natural) > 80, "{natural}");
        assert_eq!(natural.lines().count(), 6, "one line per row, header and rules:\n{natural}");
        let fitted = wide().render(Fit::Columns(80));
        assert!(widest_line(&fitted) <= 80, "{fitted}");
        assert!(fitted.lines().count() > 6, "cells wrapped onto more lines:\n{fitted}");
        for word in ["recursive-doubling", "90155.520", "164", "closed", "64x64"] {
            assert!(fitted.contains(word), "{word} kept whole:\n{fitted}");
        }
    }

    #[test]
    fn no_width_cuts_a_word() {
        let squeezed = wide().render(Fit::Columns(20));
        for word in ["recursive-doubling", "90155.520", "topology"] {
            assert!(squeezed.contains(word), "{word} kept whole:\n{squeezed}");
        }
    }

    #[test]
    fn a_table_narrower_than_the_width_is_left_as_it_is() {
        assert_eq!(wide().render(Fit::Columns(500)), wide().render(Fit::Natural));
    }

    #[test]
    fn off_a_terminal_the_table_keeps_its_natural_width() {
        // Tests run with standard output captured: not a terminal.
        use std::io::IsTerminal;
        if !std::io::stdout().is_terminal() {
            assert_eq!(wide().to_string(), wide().render(Fit::Natural));
        }
    }

    #[test]
    fn right_aligned_columns_pad_on_the_left() {
        let mut table = HouseTable::new(["name", "µs"]);
        table.row(["a", "1.5"]).row(["b", "100.25"]).right_aligned(&[1]);
        let text = table.render(Fit::Natural);
        assert!(text.contains("┆    1.5 │"), "{text}");
    }
}
