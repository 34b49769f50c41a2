//! The columns of CSV lines: the fast path of the Python readers, given a chunk of lines
//! (`gpudvfs.data.columns`) or a whole file's data lines at once (`gpudvfs.data.valid_csv`).
//!
//! The lines are split and converted in one pass, reading only what Python's csv module,
//! `str.splitlines` and `float()` would read the same way: no quote anywhere (a quoted field
//! needs the csv module), no blank line, no line break but `'\n'` (`"\r\n"` included), no
//! field longer than the csv module's limit, every line the expected number of fields, every
//! number one that `f64::from_str` takes. That is a subset of what `float()` takes, rounded
//! correctly as `float()` rounds, so the values are the same. Anything else gives `None`, and
//! the reader takes the lines through the csv module, where each bad cell gets its message.
//! Text of a megabyte or more is split at line ends over the cores.

use crate::alloc::{filled, product, reserved};
use crate::error::{CoreError, CoreResult};

/// Bytes of text below which the lines are read on the calling thread.
const MIN_BYTES_PER_THREAD: usize = 1 << 20;

/// A text column as numpy lays out a `U<width>` array: `width` UCS-4 code points a row,
/// padded with zeros (`width` is at least 1, as numpy makes an array of empty strings).
#[derive(Debug, PartialEq)]
pub struct TextColumn {
    pub width: usize,
    pub chars: Vec<u32>,
}

/// The columns of the lines, each kind in the order of its fields.
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
    // A printable ASCII character at each end: nothing to strip (the usual case, made cheap).
    let printable = |c: Option<&u8>| c.is_some_and(|&c| c > b' ' && c < 0x80);
    let b = field.as_bytes();
    if printable(b.first()) && printable(b.last()) {
        field
    } else {
        field.trim_matches(is_py_space)
    }
}

/// Text of printable ASCII and `'\n'` alone, whose lines need no look for what
/// `needs_csv_module` looks for (checked 64 bytes at a time, which the compiler vectorizes).
fn is_plain(text: &str) -> bool {
    text.as_bytes().chunks(64).all(|c| {
        c.iter().fold(true, |ok, &b| {
            ok & (((0x20..0x80).contains(&b) && b != b'"') | (b == b'\n'))
        })
    })
}

/// A line the csv module must read: one with a quote, a NUL (an error of its own), or a
/// character at which `str.splitlines` ends a line (`'\r'` ending it aside).
fn needs_csv_module(line: &str) -> bool {
    line.bytes()
        .any(|c| c == b'"' || (c < 0x20 && matches!(c, 0 | b'\r' | 0x0b | 0x0c | 0x1c..=0x1e)))
        || (!line.is_ascii() && line.contains(['\u{85}', '\u{2028}', '\u{2029}']))
}

/// The columns of a run of whole lines: numbers, and each text cell as its byte range in the
/// whole text with the widest cell's count of characters.
struct Part {
    rows: usize,
    plain: bool,
    numbers: Vec<Vec<f64>>,
    spans: Vec<Vec<(usize, usize)>>,
    widths: Vec<usize>,
}

/// The columns of `text` (which starts `base` bytes into the whole text), or `None` where a
/// line is not one the fast path reads (see the module notes).
fn read_part(text: &str, base: usize, numeric: &[bool], limit: usize) -> CoreResult<Option<Part>> {
    let lines = text.bytes().filter(|&b| b == b'\n').count() + 1;
    let kinds = |number: bool| numeric.iter().filter(|&&n| n == number).count();
    let plain = is_plain(text);
    let mut part = Part {
        rows: lines,
        plain,
        numbers: (0..kinds(true))
            .map(|_| reserved(lines, "a numeric column"))
            .collect::<CoreResult<_>>()?,
        spans: (0..kinds(false))
            .map(|_| reserved(lines, "a text column"))
            .collect::<CoreResult<_>>()?,
        widths: vec![1; kinds(false)],
    };
    let mut at = base;
    for raw in text.split('\n') {
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        if (!plain && needs_csv_module(line)) || strip(line).is_empty() {
            return Ok(None);
        }
        let (mut j, mut number, mut word) = (0, 0, 0);
        let mut start = at;
        for field in line.split(',') {
            if j == numeric.len() || field.len() > limit {
                return Ok(None);
            }
            let cell = strip(field);
            if numeric[j] {
                let Ok(x) = cell.parse::<f64>() else {
                    return Ok(None);
                };
                part.numbers[number].push(x);
                number += 1;
            } else {
                let offset = start + (cell.as_ptr() as usize - field.as_ptr() as usize);
                part.spans[word].push((offset, offset + cell.len()));
                let width = if plain {
                    cell.len()
                } else {
                    cell.chars().count()
                };
                part.widths[word] = part.widths[word].max(width);
                word += 1;
            }
            start += field.len() + 1;
            j += 1;
        }
        if j != numeric.len() {
            return Ok(None);
        }
        at += raw.len() + 1;
    }
    Ok(Some(part))
}

/// `text` cut at line ends into about `n` parts, each with its offset.
fn parts(text: &str, n: usize) -> Vec<(usize, &str)> {
    let mut out = Vec::with_capacity(n);
    let (mut base, mut rest) = (0, text);
    for left in (2..=n).rev() {
        let target = rest.len() / left;
        let Some(i) = rest.as_bytes()[target..].iter().position(|&b| b == b'\n') else {
            break;
        };
        out.push((base, &rest[..target + i]));
        base += target + i + 1;
        rest = &rest[target + i + 1..];
    }
    out.push((base, rest));
    out
}

/// The columns of `text`, lines separated by `'\n'` (one ending the text ends its last line),
/// each line's fields by `','`;
/// `numeric[j]` says whether field `j` is a number; `limit` is the csv module's field size
/// limit. `Ok(None)`: the lines need the csv module (see the module notes); `Err`: a column
/// too large to allocate.
pub fn split_columns(text: &str, numeric: &[bool], limit: usize) -> CoreResult<Option<Columns>> {
    if numeric.is_empty() {
        return Err(CoreError::Value("a row has at least one field".into()));
    }
    let text = text.strip_suffix('\n').unwrap_or(text);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let pieces = parts(text, (text.len() / MIN_BYTES_PER_THREAD).clamp(1, cores));
    let read: Vec<CoreResult<Option<Part>>> = if pieces.len() == 1 {
        vec![read_part(text, 0, numeric, limit)]
    } else {
        std::thread::scope(|s| {
            let workers: Vec<_> = pieces
                .iter()
                .map(|&(base, piece)| s.spawn(move || read_part(piece, base, numeric, limit)))
                .collect();
            workers
                .into_iter()
                .map(|w| w.join().expect("a CSV worker thread panicked"))
                .collect()
        })
    };
    let mut done = Vec::with_capacity(read.len());
    for r in read {
        match r? {
            Some(p) => done.push(p),
            None => return Ok(None),
        }
    }
    Ok(Some(join(text, done)?))
}

/// The parts' columns end to end.
fn join(text: &str, mut done: Vec<Part>) -> CoreResult<Columns> {
    let n: usize = done.iter().map(|p| p.rows).sum();
    let mut columns = Columns {
        numbers: Vec::new(),
        texts: Vec::new(),
    };
    for k in 0..done[0].numbers.len() {
        if done.len() == 1 {
            columns
                .numbers
                .push(std::mem::take(&mut done[0].numbers[k]));
            continue;
        }
        let mut values = reserved(n, "a numeric column")?;
        for p in &done {
            values.extend_from_slice(&p.numbers[k]);
        }
        columns.numbers.push(values);
    }
    let mut texts = (0..done[0].spans.len())
        .map(|k| {
            let width = done.iter().map(|p| p.widths[k]).max().unwrap_or(1);
            let chars = filled(
                product(&[n, width], "a text column")?,
                0u32,
                "a text column",
            )?;
            Ok(TextColumn { width, chars })
        })
        .collect::<CoreResult<Vec<_>>>()?;
    // Each part fills its rows of every text column, the parts on threads of their own.
    let mut rows: Vec<Vec<&mut [u32]>> = done.iter().map(|_| Vec::new()).collect();
    for t in &mut texts {
        let mut rest = t.chars.as_mut_slice();
        for (p, out) in done.iter().zip(&mut rows) {
            let (mine, after) = std::mem::take(&mut rest).split_at_mut(p.rows * t.width);
            out.push(mine);
            rest = after;
        }
    }
    let fill = |p: &Part, outs: Vec<&mut [u32]>| {
        for (spans, out) in p.spans.iter().zip(outs) {
            let w = out.len() / p.rows.max(1);
            for (row, &(a, b)) in out.chunks_exact_mut(w.max(1)).zip(spans) {
                if p.plain {
                    for (slot, &c) in row.iter_mut().zip(&text.as_bytes()[a..b]) {
                        *slot = u32::from(c);
                    }
                } else {
                    for (slot, c) in row.iter_mut().zip(text[a..b].chars()) {
                        *slot = c as u32;
                    }
                }
            }
        }
    };
    if done.len() == 1 {
        fill(&done[0], rows.pop().unwrap_or_default());
    } else {
        std::thread::scope(|s| {
            for (p, outs) in done.iter().zip(rows) {
                s.spawn(move || fill(p, outs));
            }
        });
    }
    columns.texts = texts;
    Ok(columns)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str, numeric: &[bool]) -> Option<Columns> {
        split_columns(text, numeric, 100).unwrap()
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
            ("a,1\n\n", &[false, true]),       // an empty line
            ("a,1_000", &[false, true]),       // float() takes it, Rust does not
            ("a,", &[false, true]),            // an empty number
            ("a,x", &[false, true]),
            ("a,1\n \t", &[false, true]),       // a blank line
            (" ", &[false]),                    // a blank line one field wide
            ("a,1\rb,2", &[false, true]),       // a line ended by '\r' alone
            ("a,1\u{2028}b,2", &[false, true]), // or by another of splitlines' breaks
            ("a,1\0", &[false, true]),          // a NUL
            (&"x".repeat(101), &[false]),       // a field beyond the limit (100 here)
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
    fn plain_text_is_printable_ascii_and_line_ends() {
        let long = "a,1.5\n".repeat(40);
        assert!(is_plain(&long) && is_plain(""));
        for odd in ["\"", "\t", "\r", "\0", "é", "\u{7f}\u{85}"] {
            assert!(!is_plain(&format!("{long}{odd}{long}")), "{odd:?}");
        }
    }

    #[test]
    fn crlf_lines_read_as_lf_lines() {
        assert_eq!(
            read("a,1\r\nb,2\r\n", &[false, true]),
            read("a,1\nb,2", &[false, true])
        );
    }

    #[test]
    fn parts_read_as_the_whole() {
        let text: String = (0..1000)
            .map(|i| format!("k{} ,{i}.5\n", "é".repeat(i % 7)))
            .collect();
        let text = text.trim_end();
        for n in [1, 2, 3, 7] {
            let pieces = parts(text, n);
            assert_eq!(
                pieces.iter().map(|p| p.1).collect::<Vec<_>>().join("\n"),
                text
            );
            let done = pieces
                .iter()
                .map(|&(base, p)| read_part(p, base, &[false, true], 100).unwrap().unwrap())
                .collect();
            assert_eq!(
                join(text, done).unwrap(),
                read(text, &[false, true]).unwrap()
            );
        }
    }

    #[test]
    fn a_row_needs_a_field() {
        assert!(split_columns("1", &[], 10).is_err());
    }
}
