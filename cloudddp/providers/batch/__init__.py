"""What the Slurm and PBS providers share (base.py: settings, request, provider; shell.py; tools.py)."""

PROVIDER = None  # shared code, not a provider: the registry skips it, and `-p batch` is simply unknown
