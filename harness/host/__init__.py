"""The machine and the process as they are: the environment probed (torch, CUDA, CPU, /proc), torch's numeric
state read and restored, settings applied for a scope, the two-threads entry probe, and what a backend says
about itself, read once."""
