"""Who a connection is and what it may do: users, passwords, tokens, nkeys and permissions
(``authenticator``), operator mode with its account resolver (``trust``), the per-connection
nonce and JWT expiry (``identity``) and account imports/exports (``imports``).
"""

from natsd.server.auth.authenticator import AuthResult, Authenticator, CompiledPermissions, SubjectFilter, is_bcrypt

__all__ = ["Authenticator", "AuthResult", "SubjectFilter", "CompiledPermissions", "is_bcrypt"]
