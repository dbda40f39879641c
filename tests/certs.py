"""Test certificates, made fresh with `cryptography`: a CA, a broker certificate for localhost /
127.0.0.1, and client certificates whose Common Name is the role they authenticate."""
from __future__ import annotations

import datetime
import ipaddress

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

_NOW = datetime.datetime(2025, 1, 1, tzinfo=datetime.timezone.utc)
_LATER = datetime.datetime(2125, 1, 1, tzinfo=datetime.timezone.utc)


def _key():
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _cert(subject_cn, key, issuer_name, issuer_key, ca=False, sans=()):
    b = (x509.CertificateBuilder()
         .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject_cn)]))
         .issuer_name(issuer_name).public_key(key.public_key())
         .serial_number(x509.random_serial_number())
         .not_valid_before(_NOW).not_valid_after(_LATER)
         .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if sans:
        b = b.add_extension(x509.SubjectAlternativeName(list(sans)), critical=False)
    return b.sign(issuer_key, hashes.SHA256())


def make(directory, clients=("admin",)) -> dict:
    """Write ca.pem, broker-cert.pem, broker-key.pem and, per client CN, CN-cert.pem and
    CN-key.pem into directory; their paths by name."""
    ca_key = _key()
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "pulsarctl test CA")])
    ca = _cert("pulsarctl test CA", ca_key, ca_name, ca_key, ca=True)
    out = {}

    def write(name, data: bytes):
        path = directory / name
        path.write_bytes(data)
        out[name] = str(path)

    write("ca.pem", ca.public_bytes(serialization.Encoding.PEM))
    bk = _key()
    broker = _cert("localhost", bk, ca_name, ca_key,
                   sans=(x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))))
    write("broker-cert.pem", broker.public_bytes(serialization.Encoding.PEM))
    write("broker-key.pem", _pem_key(bk))
    for cn in clients:
        k = _key()
        write(f"{cn}-cert.pem", _cert(cn, k, ca_name, ca_key).public_bytes(serialization.Encoding.PEM))
        write(f"{cn}-key.pem", _pem_key(k))
    return out
