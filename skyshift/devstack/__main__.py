"""``python -m skyshift.devstack`` runs the ``skyshift`` command with this interpreter."""

from skyshift.devstack.cli import main

main()
