"""The reference packer's import path for its error (``harness.packers.packing`` imports
``PackingError`` from here): the reference packer's identity is the sha256 of its source file, which
every ledger records beside the shapes it promoted, so that file's text must not change when a module it
imports moves. Everything else imports :mod:`harness.base.errors`."""

from harness.base.errors import PackingError

__all__ = ["PackingError"]
