"""`kipling dev-certs`: a certificate authority and PEM keystores for a local or compose cluster.

::

    kipling dev-certs --dir pki --name broker --host broker-1 --host broker-2 --host localhost

writes ``pki/ca.pem`` (what clients trust: ``ssl.ca.location``, ``ssl.truststore.location`` with
``ssl.truststore.type=PEM``) and ``pki/<name>.pem`` for each ``--name`` (private key and certificate,
valid for localhost, 127.0.0.1 and every ``--host``: ``ssl.keystore.location`` with
``ssl.keystore.type=PEM``, or a client's certificate for mutual TLS). Files already there are kept,
so a restarted cluster keeps the CA its clients trust; ``--force`` makes new ones. For development
only: keys are unencrypted and the CA key is not kept (no more certificates can be signed by it).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from security.dev_certs import write_dev_pki


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "dev-certs",
        help="write a dev certificate authority and PEM keystores (for TLS listeners on a dev cluster)",
        description=__doc__.split("::")[0].strip() if __doc__ else None,
    )
    p.add_argument(
        "--dir", type=Path, required=True, metavar="DIR", help="where to write ca.pem and <name>.pem"
    )
    p.add_argument(
        "--name",
        action="append",
        required=True,
        metavar="NAME",
        help="a keystore to write, DIR/NAME.pem (repeatable), e.g. broker or a client's name",
    )
    p.add_argument(
        "--host",
        action="append",
        default=[],
        metavar="HOST",
        help="a DNS name or IP address the certificates are valid for, besides localhost and 127.0.0.1",
    )
    p.add_argument("--force", action="store_true", help="replace files already there")
    p.add_argument(
        "--readable-by",
        type=int,
        default=None,
        metavar="UID",
        help="give the files to this user id (a container's unprivileged broker user)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    directory: Path = args.dir
    names = tuple(args.name)
    wanted = [directory / "ca.pem", *(directory / f"{name}.pem" for name in names)]
    if not args.force and all(path.exists() for path in wanted):
        print(f"kept the certificates in {directory} (--force replaces them)")
        return 0
    try:
        pki = write_dev_pki(directory, names, hosts=tuple(args.host))
    except OSError as exc:
        print(f"dev-certs: cannot write to {directory}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    if args.readable_by is not None:
        for path in (pki.ca, *pki.keystores.values()):
            os.chown(path, args.readable_by, -1)
    print(f"wrote {pki.ca} and {', '.join(str(p) for p in pki.keystores.values())}")
    return 0
