"""A live CSV cut inside a quoted field (a writer stopped mid-row by a full disk) is read
without its cut last line, not refused (the C reader raises "EOF inside string")."""

from pathlib import Path

from harness.results.livecsv import read_live_csv


def test_a_row_cut_inside_a_quoted_field_is_dropped_not_fatal(tmp_path: Path) -> None:
    path = tmp_path / "samples.csv"
    path.write_text('a,b\n1,"x"\n2,"y"\n3,"cut in the mid')
    frame = read_live_csv(path)
    assert frame.to_dict("list") == {"a": ["1", "2"], "b": ["x", "y"]}
