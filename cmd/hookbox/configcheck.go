package main

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"

	"github.com/goccy/go-yaml"
	"github.com/spf13/cobra"

	"github.com/hookbox/hookbox/config"
	"github.com/hookbox/hookbox/service"
	"github.com/hookbox/hookbox/target"
)

func newConfigCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Check a config file",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmd.Help()
		},
	}
	cmd.AddCommand(newConfigCheckCmd(g))
	return cmd
}

func newConfigCheckCmd(g *globalFlags) *cobra.Command {
	var listen string
	cmd := &cobra.Command{
		Use:   "check --config FILE",
		Short: "Validate a config file and print the configuration serve would run",
		Long: `check loads the file as serve does: every unknown key (with its line and the
key it most resembles) and every bad value (naming its key) is an error, and
the command exits 1. Every forward and exec is built as serve builds it at
start, so what serve would refuse there (forward_headers naming one header
twice, say) is refused here too.

A valid file is printed as YAML with the defaults filled in and every secret
masked (admin_token, secrets, forward_headers values, exec_env values, the
database password, and every other value taken from the environment by
${NAME}, but listen and admin_listen), followed by every warning serve
would log at start, among them: sources on an example secret, secrets too
short to be masked in logs, sources that check no signature and admit every
address, sources with no forward, exec or targets that do not say
store_only, exec commands that cannot be found, an admin_listen without
admin_token, a config file others can read, a db that --db or HOOKBOX_DB
overrides, a sqlite.busy_timeout under 100ms (README's Commands section
lists them all). The --db
and --listen flags, HOOKBOX_DB and RETENTION_DAYS are applied as serve
applies them. --strict exits 1 when there is any warning.`,
		Example: `  hookbox config check --config hookbox.yaml
  hookbox config check --config hookbox.yaml --strict`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			strict, _ := cmd.Flags().GetBool("strict")
			cfg, err := g.serveConfig(listen)
			if err != nil {
				return err
			}
			if err := buildTargets(cfg); err != nil {
				return err
			}
			warnings := serveWarnings(cfg)
			if err := writeConfigCheck(cmd.OutOrStdout(), g.configPath, cfg, warnings); err != nil {
				return err
			}
			if strict && len(warnings) > 0 {
				return fmt.Errorf("%d warnings (--strict)", len(warnings))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "", "address serve would listen on (default the config's listen, else :8080)")
	cmd.Flags().Bool("strict", false, "exit 1 when there is any warning")
	return cmd
}

// literalDollar matches a "$" that a config file must write "$$".
var literalDollar = regexp.MustCompile(`\$([{A-Za-z_])`)

// escapeDollars writes "$$" for each literalDollar in the strings v holds
// (a Masked config, which shares no list or map with the loaded one):
// fields, list items and map values, not map keys.
func escapeDollars(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		if v.CanSet() {
			v.SetString(literalDollar.ReplaceAllString(v.String(), "$$$$$1"))
		}
	case reflect.Pointer:
		if !v.IsNil() {
			escapeDollars(v.Elem())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				escapeDollars(v.Field(i))
			}
		}
	case reflect.Slice:
		for i := range v.Len() {
			escapeDollars(v.Index(i))
		}
	case reflect.Map:
		iter := v.MapRange()
		for iter.Next() {
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(iter.Value())
			escapeDollars(e)
			v.SetMapIndex(iter.Key(), e)
		}
	}
}

// writeConfigCheck prints the effective, masked configuration and the
// warnings, as YAML: the warnings and notes are comments, so the output
// can be read back as a config.
func writeConfigCheck(w io.Writer, path string, cfg *config.Config, warnings []string) error {
	shown := cfg.Effective().Masked()
	// The values are as expanded: a "$" before "{" or a name, which the
	// file had to write "$$" (a shell variable in exec), is written so
	// again, or the output would not load. Keys are never expanded, so
	// they are left as they are.
	escapeDollars(reflect.ValueOf(shown).Elem())
	b, err := yaml.MarshalWithOptions(shown, yaml.OmitZero(), yaml.IndentSequence(true))
	if err != nil {
		return fmt.Errorf("print config: %w", err)
	}
	fmt.Fprintf(w, "# %s is valid. The configuration hookbox serve would run, defaults filled in, secrets masked:\n", printable(path))
	if _, err := w.Write(b); err != nil {
		return err
	}
	// The notes and warnings are masked as serve's log is: one about an
	// exec command taken from the environment names it as expanded,
	// where the config above masks it.
	red := service.Redactor(cfg)
	for _, n := range cfg.Notes() {
		fmt.Fprintf(w, "# note: %s\n", printable(red.String(n)))
	}
	if len(warnings) == 0 {
		fmt.Fprintln(w, "# no warnings")
		return nil
	}
	fmt.Fprintf(w, "# %d warnings:\n", len(warnings))
	for _, s := range warnings {
		fmt.Fprintf(w, "# warning: %s\n", printable(red.String(s)))
	}
	return nil
}

// buildTargets builds every forward and exec that serve would build from
// cfg, without running any, so that what serve would refuse at start
// (a header that cannot be sent, a bad exec_env entry) is refused here too.
func buildTargets(cfg *config.Config) error {
	var errs []error
	for _, src := range cfg.Sources {
		if _, err := target.FromConfig(src, nil, nil); err != nil {
			errs = append(errs, err)
		}
		for _, t := range src.Targets {
			if t.GoHandler {
				continue
			}
			if _, err := target.FromTarget(src, t, nil, nil); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
