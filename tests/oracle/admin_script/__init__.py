"""The real pulsar-admin against the real Pulsar standalone and against `pulsarctl serve`'s
admin REST: the script (commands.txt), its runner (script.py), the normaliser (normalise.py)
and the comparer (compare.py). test_admin_compare.py runs it; `python -m admin_script` (from
tests/oracle, inside the namespace) runs it by hand and prints the table."""
