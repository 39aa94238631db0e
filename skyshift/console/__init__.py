"""The web console: one static page served by the API server, talking to the same REST API.

The page (``static/``: HTML, plain JavaScript modules and CSS, no build step, nothing fetched
from elsewhere) logs in with ``POST /token`` and then makes exactly the calls ``skyctl`` makes,
with the same bearer token and the same authorization. :mod:`skyshift.console.routes` serves it.
"""
