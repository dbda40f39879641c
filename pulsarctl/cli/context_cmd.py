"""pulsarctl context set|use|list|current|delete: named targets, as StreamNative pulsarctl's
contexts and Pulsar's client.conf (pulsarctl/config.py keeps them). `local` is the store and
the default; any other context is a remote Pulsar (a cluster, a `pulsarctl serve`) that every
command taught to work remotely runs against (pulsarctl/remote). Secrets (tokens, auth
parameters) are written 0600 and never printed: only said to be set."""
from __future__ import annotations

from typing import Annotated, Optional

from pulsarctl.cli import declare as typer  # recorded until typer is needed (declare.py)

from pulsarctl.cli import render
from pulsarctl.cli.common import Output, done, fmt, state
from pulsarctl.errors import InvalidValue, NotFound, UsageError

context = typer.Typer(help="Named targets: the local store (`local`, the default) or a remote "
                      "Pulsar's service and admin URLs with its authentication.",
                      no_args_is_help=True)

Name = Annotated[str, typer.Argument(metavar="NAME", help="Context name.", show_default=False)]


def _opt(flag: str, help_: str, metavar: str):
    return Annotated[Optional[str], typer.Option(flag, help=help_, metavar=metavar,
                                                 show_default=False)]


# client.conf's keys, as `context set --client-conf` reads them.
CLIENT_CONF = {"brokerServiceUrl": "service-url", "webServiceUrl": "admin-url",
               "authPlugin": "auth-plugin", "authParams": "auth-params",
               "tlsTrustCertsFilePath": "tls-trust-certs-file",
               "tlsAllowInsecureConnection": "tls-allow-insecure"}


def _client_conf(path: str) -> dict:
    """The fields of a Pulsar client.conf (Java properties: key=value, # comments)."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    fields = {}
    for line in lines:
        line = line.strip()
        if not line or line.startswith(("#", "!")) or "=" not in line:
            continue
        key, _, value = line.partition("=")
        field = CLIENT_CONF.get(key.strip())
        value = value.strip()
        if field and value:
            fields[field] = value.lower() == "true" if field == "tls-allow-insecure" else value
    return fields


@context.command("set", help="Create or change a context: what is given replaces, the rest "
                 "stays. Written to $XDG_CONFIG_HOME/pulsarctl/contexts.toml, mode 0600.")
def set_(
    ctx: typer.Context, name: Name,
    service_url: _opt("--service-url", "The binary protocol: pulsar://HOST:PORT (or "
                      "pulsar+ssl://).", "URL") = None,
    admin_url: Annotated[Optional[str], typer.Option(
        "--admin-url", "--admin-service-url", "--web-service-url",
        help="The admin REST API: http://HOST:PORT (or https://).", metavar="URL",
        show_default=False)] = None,
    auth_plugin: _opt("--auth-plugin", "Authentication plugin, as pulsar-client's "
                      "(AuthenticationToken, AuthenticationTls, AuthenticationBasic).",
                      "CLASS") = None,
    auth_params: _opt("--auth-params", "Its parameters (token:xxx, file:///path, "
                      "tlsCertFile:..,tlsKeyFile:.., or Basic's JSON).", "PARAMS") = None,
    token: _opt("--token", "A token (AuthenticationToken).", "TOKEN") = None,
    token_file: _opt("--token-file", "A file holding the token, read at each command.",
                     "FILE") = None,
    tls_trust_certs_file: _opt("--tls-trust-certs-file", "CA certificates that sign the "
                               "target's.", "FILE") = None,
    tls_allow_insecure: Annotated[Optional[bool], typer.Option(
        "--tls-allow-insecure/--no-tls-allow-insecure",
        help="Accept any TLS certificate of the target.", show_default=False)] = None,
    tls_cert_file: _opt("--tls-cert-file", "A TLS client certificate (AuthenticationTls).",
                        "FILE") = None,
    tls_key_file: _opt("--tls-key-file", "Its private key.", "FILE") = None,
    client_conf: _opt("--client-conf", "Take the URLs and auth of a Pulsar client.conf (flags "
                      "given here win).", "FILE") = None,
    use: Annotated[bool, typer.Option("--use", help="Also make it the current context.")]
    = False,
    output: Output = None,
):
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl import config

    config.check_context_name(name)
    if name == config.LOCAL:
        raise InvalidValue("`local` is the local store and has no URLs",
                           hint="choose another name; the store is chosen with --store")
    given = _client_conf(client_conf) if client_conf else {}
    given.update({k: v for k, v in {
        "service-url": service_url, "admin-url": admin_url, "auth-plugin": auth_plugin,
        "auth-params": auth_params, "token": token, "token-file": token_file,
        "tls-trust-certs-file": tls_trust_certs_file, "tls-allow-insecure": tls_allow_insecure,
        "tls-cert-file": tls_cert_file, "tls-key-file": tls_key_file}.items() if v is not None})
    doc = config.read_contexts()
    old = doc["contexts"].get(name, {})
    fields = {**old, **given}
    # A token replaces a token file and the other way round; so does another kind of auth.
    if "token" in given:
        fields.pop("token-file", None)
    if "token-file" in given:
        fields.pop("token", None)
    fields = config.check_context_fields(fields)
    if not fields.get("service-url") and not fields.get("admin-url"):
        raise UsageError(f"context {name} needs --service-url or --admin-url (or both)",
                         hint="e.g. --service-url pulsar://HOST:6650 --admin-url http://HOST:8080")
    doc["contexts"][name] = fields
    if use:
        doc["current"] = name
    config.write_contexts(doc)
    shown = config.Context(name, fields, "contexts file").shown()
    done(ctx, output, {**shown, "current": doc["current"] == name},
         f"{'updated' if old else 'set'} context {name}"
         + (" (now the current context)" if use else ""))


@context.command("use", help="Make NAME the current context (`local`: the store).")
def use_(ctx: typer.Context, name: Name, output: Output = None):
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl import config

    config.check_context_name(name)
    doc = config.read_contexts()
    if name != config.LOCAL and name not in doc["contexts"]:
        raise NotFound(f"context {name!r} not found",
                       hint="list them with `pulsarctl context list`")
    doc["current"] = name
    config.write_contexts(doc)
    done(ctx, output, {"current": name}, f"the current context is {name}")
    _overridden(name)


def _overridden(name: str) -> None:
    """Say when the environment overrides the current context (it does, by design: cron and
    scripts set it), so `context use` is never silently without effect."""
    import os  # lazy: loaded when the command runs, not when the command tree is built

    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl import config

    for var in (config.ENV_SERVICE_URL, config.ENV_ADMIN_URL, config.ENV_STORE):
        if os.environ.get(var):
            render.err(f"warning: ${var} is set and takes precedence over the current context "
                       f"{name}; see `pulsarctl context current`")
            return


def _local_doc(st) -> dict:
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl.config import resolve_store_source

    path, source = resolve_store_source(st.store)
    return {"name": "local", "store": path, "storeSource": source}


@context.command("list", help="List the contexts (`local` first); * marks the current one. "
                 "Secrets show as (set).")
def list_(ctx: typer.Context, output: Output = None):
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl import config

    doc = config.read_contexts()
    current = doc["current"] or config.LOCAL
    rows = [{**_local_doc(state(ctx)), "current": current == config.LOCAL}]
    rows += [{**config.Context(n, f, "contexts file").shown(), "current": n == current}
             for n, f in sorted(doc["contexts"].items())]
    out = fmt(ctx, output)
    if out == render.TEXT:
        render.table(["", "name", "service-url", "admin-url", "auth"],
                     [["*" if r["current"] else "", r["name"],
                       r.get("service-url", r.get("store", "")), r.get("admin-url", ""),
                       r.get("auth", "")] for r in rows])
    else:
        render.data(rows, out)


@context.command("current", short_help="The target commands run against now, and what chose "
                 "it.", help="The target commands run against now, and what chose it "
                 "(--context, --service-url, $PULSAR_SERVICE_URL, --store, $PULSARCTL_STORE, "
                 "the current context).")
def current(ctx: typer.Context, output: Output = None):
    st = state(ctx)
    target = st.remote
    if target is None:
        doc = _local_doc(st)
    else:
        doc = {**target.shown(), "source": target.source}
    render.data(doc, fmt(ctx, output))


@context.command("delete", help="Delete a context (the current one: `local` becomes current).")
def delete(ctx: typer.Context, name: Name, output: Output = None):
    # lazy: loaded when the command runs, not when the command tree is built
    from pulsarctl import config

    config.check_context_name(name)
    doc = config.read_contexts()
    if name not in doc["contexts"]:
        raise NotFound(f"context {name!r} not found",
                       hint="list them with `pulsarctl context list`")
    del doc["contexts"][name]
    was_current = doc["current"] == name
    if was_current:
        doc["current"] = config.LOCAL
    config.write_contexts(doc)
    done(ctx, output, {"name": name, "deleted": True, "current": doc["current"] or config.LOCAL},
         f"deleted context {name}" + ("; the current context is local" if was_current else ""))
