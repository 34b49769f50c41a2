//! The columns of a chunk of CSV lines: the fast path of the Python readers
//! (`gpudvfs.io.source`), which check a chunk of lines column by column.
//!
//! A chunk is split and converted in one pass, reading only what Python's csv module and
//! `float()` would read the same way: no quote anywhere (a quoted field needs the csv
//! module), every line the expected number of fields, every number one that `f64::from_str`
//! takes. That is a subset of what `float()` takes, rounded correctly as `float()` rounds, so
//! the values are the same. Anything else gives `None`, and the reader splits that chunk with
//! the csv module, where each bad cell gets its message.

use crate::alloc::{filled, product};
use crate::error::{CoreError, CoreResult};

/// A text column as numpy lays out a `U<width>` array: `width` UCS-4 code points a row,
/// padded with zeros (`width` is at least 1, as numpy makes an array of empty strings).
#[derive(Debug, PartialEq)]
pub struct TextColumn {
    pub width: usize,
    pub chars: Vec<u32>,
}

/// The columns of a chunk, each kind in the order of its fields.
#[derive(Debug, PartialEq)]
pub struct Columns {
    pub numbers: Vec<Vec<f64>>,
    pub texts: Vec<TextColumn>,
}

/// What Python's `str.strip()` strips: Unicode White_Space and the ASCII separators
/// U+001C..U+001F, which Python also counts as white space.
fn is_py_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

fn strip(field: &str) -> &str {
    field.trim_matches(is_py_space)
}

/// The stripped fields of each line, or `None` where a line has a quote or another number of
/// fields than `width` (an empty line has none, as the csv module reads it).
fn fields<'a>(lines: &[&'a str], width: usize) -> Option<Vec<&'a str>> {
    let mut out = Vec::with_capacity(lines.len() * width);
    for line in lines {
        if line.is_empty() || line.contains('"') {
            return None;
        }
        let before = out.len();
        out.extend(line.split(',').map(strip));
        if out.len() - before != width {
            return None;
        }
    }
    Some(out)
}

/// The columns of `text`, lines separated by `'\n'`, each line's fields by `','`;
/// `numeric[j]` says whether field `j` is a number. `Ok(None)`: the chunk needs the csv
/// module (see the module notes); `Err`: a column too large to allocate.
pub fn split_columns(text: &str, numeric: &[bool]) -> CoreResult<Option<Columns>> {
    let width = numeric.len();
    if width == 0 {
        return Err(CoreError::Value("a row has at least one field".into()));
    }
    let lines: Vec<&str> = text.split('\n').collect();
    let Some(cells) = fields(&lines, width) else {
        return Ok(None);
    };
    let n = lines.len();
    let mut columns = Columns {
        numbers: Vec::new(),
        texts: Vec::new(),
    };
    for (j, &is_number) in numeric.iter().enumerate() {
        let column = cells.iter().skip(j).step_by(width);
        if is_number {
            let mut values = filled(n, 0.0, "a numeric column")?;
            for (v, cell) in values.iter_mut().zip(column) {
                match cell.parse::<f64>() {
                    Ok(x) => *v = x,
                    Err(_) => return Ok(None),
                }
            }
            columns.numbers.push(values);
        } else {
            let w = column
                .clone()
                .map(|c| c.chars().count())
                .max()
                .unwrap_or(0)
                .max(1);
            let mut chars = filled(product(&[n, w], "a text column")?, 0u32, "a text column")?;
            for (row, cell) in chars.chunks_exact_mut(w).zip(column) {
                for (slot, c) in row.iter_mut().zip(cell.chars()) {
                    *slot = c as u32;
                }
            }
            columns.texts.push(TextColumn { width: w, chars });
        }
    }
    Ok(Some(columns))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str, numeric: &[bool]) -> Option<Columns> {
        split_columns(text, numeric).unwrap()
    }

    fn text_of(col: &TextColumn) -> Vec<String> {
        col.chars
            .chunks(col.width)
            .map(|row| {
                row.iter()
                    .take_while(|&&c| c != 0)
                    .map(|&c| char::from_u32(c).unwrap())
                    .collect()
            })
            .collect()
    }

    #[test]
    fn splits_numbers_and_stripped_texts_by_field() {
        let c = read(" a ,1.5,2e3\nbé\u{1f},-0.25, inf ", &[false, true, true]).unwrap();
        assert_eq!(
            c.numbers,
            vec![vec![1.5, -0.25], vec![2000.0, f64::INFINITY]]
        );
        assert_eq!(c.texts.len(), 1);
        assert_eq!(c.texts[0].width, 2);
        assert_eq!(text_of(&c.texts[0]), vec!["a", "bé"]);
    }

    #[test]
    fn empty_texts_make_a_column_one_wide() {
        let c = read(",1\n ,2", &[false, true]).unwrap();
        assert_eq!(
            c.texts[0],
            TextColumn {
                width: 1,
                chars: vec![0, 0]
            }
        );
    }

    #[test]
    fn what_the_csv_module_must_read_is_left_to_it() {
        for (text, numeric) in [
            ("\"a,b\",1", &[false, true][..]), // a quoted field
            ("a,1\nb", &[false, true]),        // a line too short
            ("a,1,2", &[false, true]),         // a line too long
            ("a,1\n", &[false, true]),         // an empty line
            ("a,1_000", &[false, true]),       // float() takes it, Rust does not
            ("a,", &[false, true]),            // an empty number
            ("a,x", &[false, true]),
        ] {
            assert_eq!(read(text, numeric), None, "{text:?}");
        }
    }

    #[test]
    fn numbers_round_as_python_floats_do() {
        // Halfway cases and long mantissas: correctly rounded, as float() rounds them.
        let c = read(
            "9007199254740993\n0.1\n2.2250738585072011e-308\n1e400\n-1e-400",
            &[true],
        )
        .unwrap();
        assert_eq!(c.numbers[0][0], 9007199254740992.0);
        assert_eq!(c.numbers[0][1].to_bits(), 0.1f64.to_bits());
        assert_eq!(c.numbers[0][2], 2.225073858507201e-308);
        assert_eq!(c.numbers[0][3], f64::INFINITY);
        assert!(c.numbers[0][4] == 0.0 && c.numbers[0][4].is_sign_negative());
    }

    #[test]
    fn a_row_needs_a_field() {
        assert!(split_columns("1", &[]).is_err());
    }
}
