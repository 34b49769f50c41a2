"""Streaming readers: a file is read a block of bytes and a chunk of lines at a time
(source.BLOCK_BYTES, source.CHUNK_LINES, made small here), so a bad row at a chunk's edge,
duplicates in different chunks, unreadable bytes anywhere and an early error in a big file
must behave as if the file were read whole; and the fast path (the Rust core's split and
conversion) must read as the csv module does."""

from __future__ import annotations

import csv
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gpudvfs
from gpudvfs import DataFileError
from gpudvfs.data import columns, grid_csv, source, valid_csv
from gpudvfs.data.grid_csv import TIDY
from gpudvfs.hardware.device import Measurement
from gpudvfs.hardware.sweep import COLUMNS, _row

FORMATS = ("gpmtool", "gpmtool-utils", "nvdvfs", "dcgm", "tidy", "ptx")
CHUNK = 8
GPMTOOL_HEADER = ["2", "975,3505", "2,1", "SP,INT,DRAM"]
PTX_BLOCK = 10


def tidy_rows(n: int, seed: int = 0) -> list[str]:
    """``n`` rows as `gpudvfs sweep` writes them: workloads over a clock grid, random values."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        w, c = divmod(i, 40)
        t, p = float(rng.uniform(0.1, 100)), float(rng.uniform(50, 300))
        rows.append(_row(Measurement(
            workload=f"kernel_{w}", core_mhz=600 + 30 * (c // 2), mem_mhz=(877, 5001)[c % 2], time_ms=t, watts=p,
            joules=p * t / 1e3, repetitions=int(rng.integers(10, 1000)), duration_s=float(rng.uniform(1, 2)),
            power_source=("sampled", "energy-counter")[w % 2], throttled=w % 3 == 0,
            throttle_reasons=("sw_thermal",) if w % 3 == 0 else (),
            temperature_c=None if w % 5 == 0 else float(rng.integers(30, 90)),
            result={"bytes": float(rng.integers(1, 10**9))})))
    return rows


def build(fmt: str, n: int) -> tuple[list[str], list[int], int]:
    """A valid file of ``fmt`` with ``n`` data rows: its lines, the 1-based line of each data
    row, and a numeric column (0-based) of the data rows."""
    if fmt == "ptx":
        lines, where = [], []
        for i in range(n):
            if i % PTX_BLOCK == 0:
                lines.append(f"bench{i // PTX_BLOCK}")
            lines.append(f"{(810, 3505)[i % 2]},{500 + 10 * (i % PTX_BLOCK // 2)},{1 + i / 3:.4f},{90 + i},{i + 1}")
            where.append(len(lines))
        return lines, where, 2
    head, rows, col = {
        "gpmtool": (GPMTOOL_HEADER, [f"b{i // 4},{50 + i},{600 + 100 * (i % 4)},3505,0.{i // 4 % 10},0.5,0.25"
                                     for i in range(n)], 1),
        "gpmtool-utils": (GPMTOOL_HEADER, [f"app{i},0.1,0.{i % 10},0.3" for i in range(n)], 2),
        "nvdvfs": (["abbr.,appName,coreF,memF,time/ms,warps"],
                   [f"A{i // 5},app{i // 5},{500 + 10 * (i % 5)},700,{1 + i / 3:.3f},{i}" for i in range(n)], 4),
        "dcgm": ([",index,application,sm_app_clock,sm_active,power_usage,run_time"],
                 [f"{i},{i},app{i // 5},{500 + 10 * (i % 5)},0.5,{100 + i},{1 + i / 3:.3f}" for i in range(n)], 6),
        "tidy": ([",".join(COLUMNS)], tidy_rows(n), COLUMNS.index("time_ms")),
    }[fmt]
    return head + rows, list(range(len(head) + 1, len(head) + n + 1)), col


def write(tmp_path, lines, name="f.csv"):
    p = tmp_path / name
    p.write_bytes(b"\n".join(x if isinstance(x, bytes) else x.encode() for x in lines) + b"\n")
    return p


def values(ds) -> np.ndarray:
    if isinstance(ds, gpudvfs.PowerDataset):
        return np.column_stack([ds.watts, ds.freqs_mhz, ds.utilization])
    if isinstance(ds, gpudvfs.UtilizationTable):
        return ds.utilization
    return np.column_stack([v for v in ds.columns.values() if v.dtype.kind == "f"])


def with_cell(line: str, col: int, text: str) -> str:
    fields = line.split(",")
    fields[col] = text
    return ",".join(fields)


@pytest.fixture
def small_chunks(monkeypatch):
    monkeypatch.setattr(source, "CHUNK_LINES", CHUNK)
    monkeypatch.setattr(source, "BLOCK_BYTES", 50)  # blocks end inside lines and inside chunks
    monkeypatch.setattr(valid_csv, "BLOCK_BYTES", 50)  # and the fast path's inside lines
    monkeypatch.setattr(valid_csv, "PROBE_BYTES", 300)


@pytest.fixture
def sources(monkeypatch):
    """Every Source made, to see how far each read."""
    made = []
    init = source.Source.__init__

    def spy(self, *args, **kwargs):
        init(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(source.Source, "__init__", spy)
    return made


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("line", [CHUNK, CHUNK + 1, 2 * CHUNK])
def test_bad_row_at_a_chunk_edge(tmp_path, small_chunks, fmt, line):
    lines, where, col = build(fmt, 40)
    clean = gpudvfs.read(write(tmp_path, lines, "clean.csv"), fmt)
    r = where.index(line)
    lines[line - 1] = with_cell(lines[line - 1], col, "x")
    path = write(tmp_path, lines)
    with pytest.raises(DataFileError, match="expected a number, found 'x'") as e:
        gpudvfs.read(path, fmt)
    assert (e.value.line, e.value.column) == (line, col + 1)
    with pytest.warns(gpudvfs.GpudvfsWarning):
        ds = gpudvfs.read(path, fmt, on_invalid="skip")
    assert [p.line for p in ds.skipped] == [line]
    np.testing.assert_array_equal(values(ds), np.delete(values(clean), r, axis=0))


@pytest.mark.parametrize("fmt", FORMATS)
def test_duplicate_in_a_later_chunk(tmp_path, small_chunks, fmt):
    lines, where, _ = build(fmt, 40)
    clean = gpudvfs.read(write(tmp_path, lines, "clean.csv"), fmt)
    dup = CHUNK + 2  # the second chunk; in ptx, the first block still
    lines[dup - 1] = lines[where[0] - 1]
    path = write(tmp_path, lines)
    with pytest.raises(DataFileError, match=rf"duplicate measurement .* \(first on line {where[0]}\)") as e:
        gpudvfs.read(path, fmt)
    assert e.value.line == dup
    with pytest.warns(gpudvfs.GpudvfsWarning):
        ds = gpudvfs.read(path, fmt, on_invalid="skip")
    assert [p.line for p in ds.skipped] == [dup]
    np.testing.assert_array_equal(values(ds), np.delete(values(clean), where.index(dup), axis=0))


def test_errors_are_reported_in_file_order_within_a_chunk(tmp_path):
    """A duplicate before a bad number is reported first, and skip records both in line order."""
    lines, where, col = build("nvdvfs", 20)
    lines[where[5] - 1] = lines[where[0] - 1]
    lines[where[9] - 1] = with_cell(lines[where[9] - 1], col, "-1")
    path = write(tmp_path, lines)
    with pytest.raises(DataFileError, match="duplicate") as e:
        gpudvfs.read(path)
    assert e.value.line == where[5]
    with pytest.warns(gpudvfs.GpudvfsWarning):
        ds = gpudvfs.read(path, on_invalid="skip")
    assert [p.line for p in ds.skipped] == [where[5], where[9]]


BAD_BYTES = {
    # what to put in a field -> (error phrase, whether the error names the field)
    b"a\x00b": ("unexpected NUL character", True),
    b"a\xffb": ("not UTF-8 text (invalid start byte", True),
    b"\xe2\x82": ("not UTF-8 text", True),
    b"9" * 200_000: ("field longer than 131072 characters", False),
}


@pytest.mark.parametrize("chunked", [False, True])
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("bad", list(BAD_BYTES), ids=["nul", "bad-start-byte", "cut-utf8", "long-field"])
def test_unreadable_bytes_mid_file(tmp_path, monkeypatch, chunked, fmt, bad):
    if chunked:
        monkeypatch.setattr(source, "CHUNK_LINES", CHUNK)
        monkeypatch.setattr(source, "BLOCK_BYTES", 50)
    lines, where, col = build(fmt, 40)
    line = where[20]
    fields = lines[line - 1].encode().split(b",")
    fields[col] = bad
    lines[line - 1] = b",".join(fields)
    path = write(tmp_path, lines)
    phrase, names_field = BAD_BYTES[bad]
    assert gpudvfs.detect_format(path) == fmt  # reads only the first lines
    for fmt_arg in (fmt, None):
        for on_invalid in ("raise", "skip"):
            with pytest.raises(DataFileError, match=phrase.replace("(", r"\(")) as e:
                gpudvfs.read(path, fmt_arg, on_invalid=on_invalid)
            assert e.value.line == line, str(e.value)
            assert e.value.column == (col + 1 if names_field else None), str(e.value)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("bad", list(BAD_BYTES), ids=["nul", "bad-start-byte", "cut-utf8", "long-field"])
def test_detect_format_locates_unreadable_bytes(tmp_path, fmt, bad):
    lines, _, _ = build(fmt, 10)
    lines[1] = lines[1].encode() + b"," + bad
    path = write(tmp_path, lines)
    with pytest.raises(DataFileError, match=BAD_BYTES[bad][0].replace("(", r"\(")) as e:
        gpudvfs.detect_format(path)
    assert e.value.line == 2


def test_an_earlier_bad_row_comes_before_unreadable_bytes(tmp_path):
    lines, where, col = build("tidy", 40)
    lines[where[2] - 1] = with_cell(lines[where[2] - 1], col, "nan")
    lines[where[30] - 1] = lines[where[30] - 1].encode() + b"\xff"
    path = write(tmp_path, lines)
    with pytest.raises(DataFileError, match="finite") as e:
        gpudvfs.read(path, "tidy")
    assert e.value.line == where[2]
    with pytest.raises(DataFileError, match="UTF-8") as e, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gpudvfs.read(path, "tidy", on_invalid="skip")
    assert e.value.line == where[30]


def test_a_long_line_of_short_fields_reads(tmp_path):
    lines, _, _ = build("tidy", 5)
    long_name = "w" * 100_000
    lines[2] = lines[2].replace("kernel_0", long_name, 1) + "x" * 100_000
    g = gpudvfs.read(write(tmp_path, lines), "tidy")
    assert g.app[1] == long_name and len(g.columns["result"][1]) > 100_000


def test_byte_order_mark_and_line_ends(tmp_path, small_chunks):
    lines, _, _ = build("dcgm", 30)
    plain = gpudvfs.read(write(tmp_path, lines, "plain.csv"))
    p = tmp_path / "crlf.csv"
    p.write_bytes(b"\xef\xbb\xbf" + "\r\n".join(lines).encode() + b"\r\n")
    again = gpudvfs.read(p)
    assert again.columns.keys() == plain.columns.keys()
    for k in plain.columns:
        np.testing.assert_array_equal(again.columns[k], plain.columns[k])


@pytest.fixture(scope="module")
def big_tidy(tmp_path_factory):
    """A few MB of sweep output."""
    path = tmp_path_factory.mktemp("big") / "sweep.csv"
    path.write_text("\n".join([",".join(COLUMNS), *tidy_rows(25_000, seed=1)]) + "\n")
    return path


def reference_tidy(path) -> dict[str, np.ndarray]:
    """The tidy file read whole with the csv module and float(), as the readers did before streaming."""
    with open(path, newline="") as f:
        header, *rows = list(csv.reader(f))
    return {h: np.array(c, dtype=str) if h in TIDY.text_columns else np.array([float(x) for x in c])
            for h, c in zip(header, zip(*rows))}


@pytest.mark.parametrize("chunk_lines", [None, 1000, 4097])
def test_large_file_reads_to_the_same_arrays(big_tidy, monkeypatch, chunk_lines):
    if chunk_lines:
        monkeypatch.setattr(source, "CHUNK_LINES", chunk_lines)
    g = gpudvfs.read(big_tidy)
    want = reference_tidy(big_tidy)
    assert list(g.columns) == list(want)
    for k, v in want.items():
        assert g.columns[k].dtype == v.dtype, k
        np.testing.assert_array_equal(g.columns[k], v, err_msg=k)


def test_large_gpmtool_file_numbers_benchmarks_as_before(tmp_path, monkeypatch):
    """Names recur with other utilizations (other sweeps): benchmarks are (name, utilization)."""
    monkeypatch.setattr(source, "CHUNK_LINES", 1000)
    rows = [(f"b{i % 37}", f"0.{i % 1000:03d}", fc) for i in range(1500) for fc in (600, 800, 1000)]
    path = write(tmp_path, GPMTOOL_HEADER + [f"{n},{fc / 10},{fc},3505,{u},0.5,0.25" for n, u, fc in rows])
    ds = gpudvfs.read(path)
    ids, labels, per_name = {}, [], {}
    for name, u, _ in rows:
        if (name, u) not in ids:
            ids[name, u] = len(labels)
            k = per_name[name] = per_name.get(name, 0) + 1
            labels.append(name if k == 1 else f"{name}#{k}")
    assert ds.benchmarks == tuple(labels)
    np.testing.assert_array_equal(ds.benchmark, [ids[n, u] for n, u, _ in rows])
    assert ds.row_names == tuple(n for n, _, _ in rows)


@pytest.mark.parametrize("fmt", [None, "tidy"])
def test_early_error_in_a_big_file_reads_one_chunk(big_tidy, tmp_path, monkeypatch, sources, fmt):
    monkeypatch.setattr(source, "CHUNK_LINES", 1000)
    lines = big_tidy.read_text().splitlines()
    lines[5] = with_cell(lines[5], COLUMNS.index("watts"), "-3")
    path = write(tmp_path, lines)
    with pytest.raises(DataFileError, match="expected a value > 0") as e:
        gpudvfs.read(path, fmt)
    assert e.value.line == 6
    # Told apart first (5 lines) or, with the format given, checked after the error for a hint;
    # the reader parses its header line alone, then one chunk.
    assert [s.lines_read for s in sources] == ([5, 1 + 1000] if fmt is None else [1 + 1000, 5])
    assert len(lines) > 20 * 1000


def test_gpmtool_variant_is_told_by_the_first_rows(tmp_path, monkeypatch, sources):
    monkeypatch.setattr(source, "CHUNK_LINES", 100)
    lines, where, _ = build("gpmtool", 2000)
    lines[where[1500] - 1] = lines[where[1500] - 1].split(",", 1)[1]  # a row without its name
    with pytest.raises(DataFileError, match="expected 7 fields, found 6") as e:
        gpudvfs.read(write(tmp_path, lines), "gpmtool")
    assert e.value.line == where[1500]
    lines[where[2] - 1] = "1,2,3"  # a bad row among the first: the error is that row's, early
    sources.clear()
    with pytest.raises(DataFileError, match="expected 7 fields, found 3") as e:
        gpudvfs.read(write(tmp_path, lines), "gpmtool")
    assert e.value.line == where[2]
    assert max(s.lines_read for s in sources) <= 100  # no further than the reader's first chunk


number_text = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["1_000", " 7 ", "\t3.5", "\u0663", "+.5e1", "1e", "", "nan", "-inf", "Infinity", "0x10",
                     "1,5", "1e400", "-0", "5.", "1 2", "\u00a02"]),
    st.text(alphabet="0123456789.eE+-_ naif", max_size=8),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cells=st.lists(number_text, min_size=1, max_size=6), data=st.data())
def test_the_fast_path_reads_as_the_csv_module(tmp_path, cells, data):
    """The same rows, with and without a quoted field (which sends a chunk to the csv module):
    the same arrays, or the same error."""
    lines, where, col = build("tidy", 12)
    rows = data.draw(st.lists(st.sampled_from(where), min_size=len(cells), max_size=len(cells), unique=True))
    for line, text in zip(rows, cells):
        lines[line - 1] = with_cell(lines[line - 1], col, text)
    padded = data.draw(st.sampled_from(where))  # text is stripped, whichever way it is read
    lines[padded - 1] = with_cell(lines[padded - 1], COLUMNS.index("throttle_reasons"), data.draw(
        st.sampled_from([" sw_thermal ", "\tx", " ", "hw_slowdown"])))
    quoted = list(lines)
    quoted[where[0] - 1] = '"' + quoted[where[0] - 1].replace(",", '",', 1)

    def outcome(name, lines, on_invalid):
        path = write(tmp_path, lines, name)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                g = gpudvfs.read(path, "tidy", on_invalid=on_invalid)
        except DataFileError as e:
            return str(e).replace(str(path), "")
        return [(k, v.dtype.str, v.tolist()) for k, v in g.columns.items()], [(p.line, p.message) for p in g.skipped]

    for on_invalid in ("raise", "skip"):
        assert outcome("a.csv", lines, on_invalid) == outcome("b.csv", quoted, on_invalid)


#: Characters of a text cell: any but the comma, the quote and what str.splitlines ends a
#: line at (a chunk's lines hold none); Python's white space among them, non-BMP ones too.
text_cell = st.text(st.characters(blacklist_characters=',"\0\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029',
                                  blacklist_categories=("Cs",)), max_size=6)
#: Numbers in the forms files hold them, padded with Python's white space (Unicode's too), so
#: that most chunks take the fast path; `number_text` brings the forms that do not.
plain_number = st.one_of(
    st.floats().map(repr), st.integers(-10 ** 30, 10 ** 30).map(str),
    st.from_regex(r"\A[ \t\x1f\u00a0]?[+-]?([0-9]{1,25}\.?[0-9]{0,25}|\.[0-9]{1,25})([eE][+-]?[0-9]{1,3})?"
                  r"[ \u3000]?\Z"))


@settings(max_examples=300, deadline=None)
@given(rows=st.lists(st.tuples(text_cell, plain_number, text_cell, st.one_of(plain_number, number_text)),
                     min_size=1, max_size=8))
def test_the_fast_columns_are_the_csv_modules(rows):
    """Cell by cell: where the Rust core reads a chunk, its columns are those the csv module
    and float() give: the same values, bit for bit, and the same str dtype. (Where it does not
    read one, the csv module does: `test_the_fast_path_reads_as_the_csv_module`.)"""
    fields = [columns.Field(text=True), columns.Field(), columns.Field(text=True), columns.Field()]
    texts = [",".join(r) for r in rows]
    slow, bad = columns._csv_columns(source.split_rows(texts), fields)
    fast = columns._fast_columns(texts, fields)
    if fast is None:
        return
    assert not bad.any() and not fast[1].any()
    for got, want in zip(fast[0], slow):
        assert got.dtype == want.dtype
        if got.dtype.kind == "f":
            nan = np.isnan(want)
            assert np.isnan(got).tolist() == nan.tolist()
            assert got[~nan].view(np.int64).tolist() == want[~nan].view(np.int64).tolist()
        else:
            assert got.tolist() == want.tolist()


def test_ordinary_files_take_the_fast_path(tmp_path, small_chunks, monkeypatch):
    """A file as `gpudvfs sweep` writes it is read in one pass by the Rust core, every block of
    it, and never chunk by chunk."""
    read = columns._core.csv_columns
    calls = []
    monkeypatch.setattr(columns._core, "csv_columns", lambda *a: calls.append(read(*a) is not None) or read(*a))
    monkeypatch.setattr(columns.Columns, "add", lambda *a: pytest.fail("a valid file was read chunk by chunk"))
    lines, _, _ = build("tidy", 40)
    assert len(gpudvfs.read(write(tmp_path, lines), "tidy").time_ms) == 40
    assert len(calls) > 1 and all(calls)  # 50-byte blocks: several


def test_quoted_and_unquoted_files_read_alike(tmp_path, small_chunks):
    lines, _, _ = build("tidy", 30)
    plain = gpudvfs.read(write(tmp_path, lines, "plain.csv"), "tidy")
    with open(tmp_path / "all.csv", "w", newline="") as f:
        csv.writer(f, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(csv.reader(lines))
    quoted = gpudvfs.read(tmp_path / "all.csv", "tidy")
    for k in plain.columns:
        np.testing.assert_array_equal(quoted.columns[k], plain.columns[k], err_msg=k)


def test_a_number_with_unicode_white_space_reads_alike_on_both_paths(tmp_path):
    """'14.56\\x1f' is 14.56 to the cell check (str.strip takes the unit separator); the column
    check, on the csv path that a malformed row forces, once read NaN and failed on it (the
    random fuzz found this): now both read 14.56, and the error is the malformed row's."""
    lines = ["abbr.,appName,coreF,memF,time/ms,warps", "a,x,700,700,14.56\x1f,10", "a,y,700,700,1.0 10"]
    path = tmp_path / "g.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(DataFileError, match="expected 6 fields, found 5") as e:
        gpudvfs.read(path, "nvdvfs")
    assert e.value.line == 3
    path.write_text("\n".join(lines[:2]) + "\n", encoding="utf-8")
    assert gpudvfs.read(path, "nvdvfs").time_ms.tolist() == [14.56]


def read_both(path, monkeypatch, on_invalid="raise"):
    """What gpudvfs.read makes of a tidy file (arrays and skipped rows, or the error with its
    line and column), as it is and with its locating path alone; and whether the one-pass path
    read it."""
    fast = []
    read_valid = grid_csv.read_valid

    def spy(*a):
        fast.append(read_valid(*a) is not None)
        return read_valid(*a)

    def outcome():
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                g = gpudvfs.read(path, "tidy", on_invalid=on_invalid)
        except DataFileError as e:
            return str(e), e.line, e.column
        return [(k, v.dtype.str, v.tolist()) for k, v in g.columns.items()], [(p.line, p.message) for p in g.skipped]

    with monkeypatch.context() as m:
        m.setattr(grid_csv, "read_valid", spy)
        got = outcome()
    with monkeypatch.context() as m:
        m.setattr(grid_csv, "read_valid", lambda *_: None)
        return got, outcome(), fast == [True]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(1, 30), name=text_cell.filter(str.strip), other=text_cell,
       time=st.floats(1e-3, 1e6).map(repr), pad=st.sampled_from(["", " ", "\t", "\u3000"]),
       end=st.sampled_from(["\n", "\r\n"]), last=st.booleans(), bom=st.booleans(),
       block=st.sampled_from([50, 1 << 28]), probe=st.sampled_from([300, 1 << 20]), data=st.data())
def test_the_one_pass_and_the_locating_path_read_valid_files_alike(tmp_path, monkeypatch, n, name, other, time, pad,
                                                                    end, last, bom, block, probe, data):
    """Valid files (any workload name and text, padded numbers, CRLF, a BOM, no final line end,
    blocks ending inside lines, a first block checked alone) take the one-pass path, to the
    locating path's arrays bit for bit."""
    monkeypatch.setattr(valid_csv, "BLOCK_BYTES", block)
    monkeypatch.setattr(valid_csv, "PROBE_BYTES", probe)
    lines, where, col = build("tidy", n)
    for line in where:
        lines[line - 1] = with_cell(with_cell(with_cell(lines[line - 1], 0, name), col, pad + time + pad),
                                    COLUMNS.index("result"), data.draw(st.sampled_from([other, "bytes=1"])))
    path = tmp_path / "v.csv"
    path.write_bytes(b"\xef\xbb\xbf" * bom + (end.join(lines) + end * last).encode())
    fast, slow, one_pass = read_both(path, monkeypatch)
    assert one_pass and fast == slow and isinstance(fast[0], list)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(2, 30), data=st.data(), on_invalid=st.sampled_from(["raise", "skip"]),
       bad=st.sampled_from(["-1", "x", "nan", "inf", "", " ", "1e999", "a,b", "0", '"1']))
def test_a_corrupted_cell_is_located_as_the_locating_path_locates_it(tmp_path, monkeypatch, n, data, on_invalid, bad):
    """A cell anywhere made bad (or a row made a copy of another): the same error at the same line
    and column (or the same rows skipped) as the locating path alone gives, which names that line."""
    lines, where, _ = build("tidy", n)
    line = data.draw(st.sampled_from(where))
    located = line
    if data.draw(st.booleans()):
        lines[line - 1] = with_cell(lines[line - 1], data.draw(st.integers(0, len(COLUMNS) - 1)), bad)
    else:  # the second of the two rows is the duplicate
        copied = data.draw(st.sampled_from([w for w in where if w != line]))
        lines[line - 1], located = lines[copied - 1], max(line, copied)
    fast, slow, _ = read_both(write(tmp_path, lines), monkeypatch, on_invalid)
    assert fast == slow
    if isinstance(fast[0], str):
        assert fast[1] == located
