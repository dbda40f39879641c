def test_produce_then_consume_via_cli(cli):
    r = cli("produce", "t", "-m", "a", "-m", "b")
    assert r.exit_code == 0, r.stderr
    assert r.stdout.split() == ["1:0:-1", "1:1:-1"]
    r = cli("consume", "t", "-s", "s", "-p", "Earliest", "-n", "2", "-o", "ndjson")
    assert r.exit_code == 0, r.stderr
    assert [l for l in r.stdout.splitlines() if l]
    r = cli("topics", "stats", "nope", "-o", "json")
    assert r.exit_code == 3
    assert r.stderr.startswith("error: topic persistent://public/default/nope does not exist")


def test_entry_point(run_proc):
    r = run_proc("produce", "t", "-m", "x")
    assert r.returncode == 0 and r.stdout.strip() == "1:0:-1"


def test_stdin_through_cli_runner(cli):
    r = cli("produce", "t2", "--stdin", input="a\nb\nc\n")
    assert r.exit_code == 0, r.stderr
    assert len(r.stdout.split()) == 3
