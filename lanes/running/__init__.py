"""Running lanes: the plan, arrangements and variants, the runner, the device queue, neighbours, canaries."""
