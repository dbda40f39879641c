"""Basic authentication as Pulsar's AuthenticationProviderBasic: an htpasswd file
(`--basic-auth-file`, Pulsar's basicAuthConf / -Dpulsar.auth.basic.conf), one `user:hash` a line;
a client that sends user and password is authenticated as the role named by the user.

Hashes, as Pulsar reads them (commons-codec's Md5Crypt.apr1Crypt for `$apr1$`, Crypt.crypt for
the rest):
- `$apr1$` (htpasswd -m, Apache's MD5) and `$1$` (MD5-crypt): computed here with hashlib, on
  every platform;
- `$5$`, `$6$` (SHA-crypt) and the traditional 13-character DES crypt (htpasswd -d): through
  Python's `crypt` module, which exists up to Python 3.12 on Unix; where it does not, a line
  with such a hash is refused with an error that says to use `$apr1$` (htpasswd -m).
bcrypt (`$2y$`, htpasswd -B) and `{SHA}` are not accepted, as Pulsar does not accept them.
"""
from __future__ import annotations

import hashlib
import hmac
import warnings

from pulsarctl.errors import AuthenticationFailed, InvalidValue

_ITOA64 = "./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def md5_crypt(password: bytes, salt: bytes, magic: bytes = b"$apr1$") -> str:
    """MD5-crypt (magic `$1$`) and Apache's variant of it (`$apr1$`): the same algorithm, the
    magic string mixed in differs (Poul-Henning Kamp's md5crypt)."""
    salt = salt[:8]
    inner = hashlib.md5(password + salt + password).digest()
    ctx = password + magic + salt
    n = len(password)
    while n > 0:
        ctx += inner[:min(16, n)]
        n -= 16
    i = len(password)
    while i:
        ctx += b"\0" if i & 1 else password[:1]
        i >>= 1
    final = hashlib.md5(ctx).digest()
    for r in range(1000):
        c = password if r & 1 else final
        if r % 3:
            c += salt
        if r % 7:
            c += password
        c += final if r & 1 else password
        final = hashlib.md5(c).digest()
    out = ""
    for a, b, c in ((0, 6, 12), (1, 7, 13), (2, 8, 14), (3, 9, 15), (4, 10, 5)):
        out += _to64((final[a] << 16) | (final[b] << 8) | final[c], 4)
    out += _to64(final[11], 2)
    return f"{magic.decode()}{salt.decode('ascii', 'replace')}${out}"


def _to64(v: int, n: int) -> str:
    s = ""
    for _ in range(n):
        s += _ITOA64[v & 0x3F]
        v >>= 6
    return s


def _system_crypt(password: str, hashed: str) -> str:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # deprecated since 3.11, gone in 3.13
            import crypt  # lazy: optional module (removed in Python 3.13)
    except ImportError:
        raise InvalidValue("this Python has no crypt module for DES, $5$ or $6$ password hashes",
                           hint="hash the passwords with `htpasswd -m` ($apr1$)") from None
    return crypt.crypt(password, hashed) or ""


def hash_matches(password: str, hashed: str) -> bool:
    """Whether password gives hashed, under the scheme hashed names (see the module's list)."""
    pw = password.encode()
    for magic in ("$apr1$", "$1$"):
        if hashed.startswith(magic):
            salt = hashed[len(magic):].split("$", 1)[0].encode()
            return hmac.compare_digest(md5_crypt(pw, salt, magic.encode()), hashed)
    if hashed.startswith(("$2", "{SHA}")):
        raise InvalidValue(f"password hashes of the form {hashed[:4]}... are not supported "
                           "(nor are they by Pulsar)",
                           hint="hash the passwords with `htpasswd -m` ($apr1$)")
    return hmac.compare_digest(_system_crypt(password, hashed), hashed)


def parse(text: str, where: str = "the htpasswd file") -> dict[str, str]:
    """user -> hash from htpasswd lines (blank lines and # comments skipped)."""
    users: dict[str, str] = {}
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        user, sep, hashed = line.partition(":")
        if not sep or not user or not hashed:
            raise InvalidValue(f"line {n} of {where} is not user:hash",
                               hint="make the file with `htpasswd -c -m FILE USER`")
        users[user] = hashed
    return users


class BasicAuth:
    """The users of an htpasswd file; check(user, password) -> the role."""

    def __init__(self, users: dict[str, str]):
        self.users = dict(users)

    @classmethod
    def from_file(cls, path: str) -> "BasicAuth":
        try:
            with open(path, encoding="utf-8") as f:
                return cls(parse(f.read(), path))
        except OSError as exc:
            raise InvalidValue(f"cannot read the basic auth file {path}: {exc.strerror or exc}",
                               hint="pass an htpasswd file to --basic-auth-file") from None

    def check(self, user: str, password: str) -> str:
        """The role user authenticates as (the user name, as in Pulsar), or
        AuthenticationFailed."""
        hashed = self.users.get(user)
        if hashed is None:
            raise AuthenticationFailed(f"unknown user {user!r}")
        if not hash_matches(password, hashed):
            raise AuthenticationFailed(f"wrong password for user {user!r}")
        return user
