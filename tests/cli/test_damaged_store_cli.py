"""The last corners of a damaged store (issue 27, item 9): a store path that is a plain file,
and a data.mdb that is a directory. Commands say so in one line (exit 1, a damaged store where it
is one, never an internal error); doctor fails (exit 1) and says what it found. Garbage over the
pages LMDB uses needs real processes (a damaged page could bring a test process down):
tests/processes/test_damage_cli.py."""
from __future__ import annotations

import json
import os

from cli_helpers import assert_error


def doctor(cli, *args):
    r = cli(*args, "-o", "json")
    assert "Traceback" not in r.stderr, r.stderr
    return r.exit_code, [x for x in json.loads(r.stdout) if not x["ok"]]


def test_a_store_path_that_is_a_plain_file_fails_doctor(cli, tmp_path):
    plain = tmp_path / "not-a-store"
    plain.write_text("notes\n")
    line = assert_error(cli("--store", str(plain), "topics", "list"), 1)
    assert "is a file, not a store directory" in line
    code, bad = doctor(cli, "--store", str(plain), "doctor")
    assert code == 1                                     # was 0: "created on first use"
    assert [x["check"] for x in bad] == ["store path"]
    assert "is a file, not a store directory" in bad[0]["detail"]
    assert plain.read_text() == "notes\n"


def test_a_data_mdb_that_is_a_directory_is_a_damaged_store(cli, store_path, tmp_path):
    os.makedirs(os.path.join(store_path, "data.mdb"))
    for args in (("topics", "list"), ("produce", "t", "-m", "x"),
                 ("read", "t", "-m", "earliest")):
        line = assert_error(cli(*args), 1)               # was: unexpected IsADirectoryError
        assert line.startswith(f"error: {store_path}/data.mdb is damaged: it is a directory, "
                               "not LMDB's data file; run `pulsarctl doctor`"), line
    code, bad = doctor(cli, "doctor")
    assert code == 1
    assert any("is damaged: it is a directory" in x["detail"] for x in bad), bad
    assert not any("could not be checked" in x["detail"] for x in bad), bad
    code, bad = doctor(cli, "doctor", "--deep")
    assert code == 1 and not any("could not be checked" in x["detail"] for x in bad), bad
    r = cli("doctor", "--salvage", str(tmp_path / "saved"), "-o", "json")
    assert r.exit_code == 1 and "unexpected" not in r.stderr and "Traceback" not in r.stderr
    assert any("is a directory" in x["detail"] for x in json.loads(r.stdout) if not x["ok"])
    assert os.path.isdir(os.path.join(store_path, "data.mdb"))
