"""Identity and access for the API server: bearer tokens, accounts, roles, invites, login
throttling and the audit trail. Secure by default: ``create_app`` turns it on unless a test
passes ``auth=False`` explicitly.
"""

from skyshift.api.auth.config import AuthConfig
from skyshift.api.auth.service import ANONYMOUS_ADMIN, AuthService, Principal

__all__ = ["ANONYMOUS_ADMIN", "AuthConfig", "AuthService", "Principal"]
