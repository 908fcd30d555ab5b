//! Settings: upstream pi's `~/.pi/agent/settings.json` and `<project>/.pi/settings.json`, the
//! `telemetry` section and the managed policy will be read here (issue 16). Nothing is read yet:
//! every choice is a flag or an environment variable of the `pi` command.
