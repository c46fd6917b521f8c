"""Which read model the deployment serves, and the switch between them (docs/architecture.md,
"Promotion"): a lineage's settings (`lineage`), the switches on the serving topic (`switches`)
and their fold in the deployment's database, where readers and workers look it up
(`pointer`)."""
