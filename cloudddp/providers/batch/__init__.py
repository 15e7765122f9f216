"""What the Slurm and PBS providers share (base.py: settings, request, provider; shell.py; tools.py). No PROVIDER."""
