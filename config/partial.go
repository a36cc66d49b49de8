package config

import (
	"errors"
	"fmt"
	"os"
)

// partialKeys are the keys that LoadPartial expands strictly, as Load
// does: the ones the commands that use it read whole. An unset variable
// in db would otherwise open the default database, not the one meant.
// dbElsewhere leaves db out: the command opens another database.
func partialKeys(dbElsewhere bool) map[string]bool {
	return map[string]bool{"db": !dbElsewhere, "listen": true, "admin_listen": true}
}

// LoadPartial reads the file at path for the commands that work on the
// database or a running server and not on deliveries (events, replay,
// purge, tail, targets, migrate, health, rejected list and show, send
// with --scheme): they read db, listen and admin_listen, the sources'
// names, providers, schemes and signature headers, and their targets'
// names, kinds and filters. On a host laid out as docs/deploy.md says,
// the secrets are in the service's environment only, not in an operator's
// shell, and such a command must work all the same.
//
// So, unlike Load: a ${NAME} whose variable is unset expands as if it
// were set to "" in every key but db, listen and admin_listen (a variable
// that is set is expanded as Load expands it, so the secrets it holds can
// still be masked in what the command shows); and only what those
// commands read is validated: db, listen and admin_listen, and the names
// of sources and targets. The file is still parsed whole: a YAML error, an
// unknown key, a value of the wrong type and a malformed ${...} are
// errors. The result must not be used to serve: its secrets may be empty
// and the rest of it is unchecked; it carries no Warnings.
//
// dbElsewhere says the command opens a database named elsewhere (--db,
// $HOOKBOX_DB): db is then neither read nor checked, and may hold a
// variable set only in the service's environment.
func LoadPartial(path string, dbElsewhere bool) (*Config, error) {
	raw, _, err := readFile(path)
	if err != nil {
		return nil, err
	}
	var c Config
	dec, err := decodeYAMLWith(raw, &c, os.LookupEnv, partialKeys(dbElsewhere))
	if err == nil {
		c.origins = dec.origins
		err = c.validatePartial(dbElsewhere)
	}
	if err != nil {
		var values []string
		if dec != nil {
			values = dec.envValues
		}
		return nil, fmt.Errorf("config %s: %w", path, redact(err, values))
	}
	for i := range c.Sources {
		c.Sources[i] = c.Sources[i].WithPreset()
	}
	return &c, nil
}

// validatePartial checks what LoadPartial's callers read: the database
// (unless dbElsewhere), the addresses, and the names of sources and
// targets.
func (c *Config) validatePartial(dbElsewhere bool) error {
	var errs []error
	if err := CheckDB(c.DB); err != nil && !dbElsewhere {
		errs = append(errs, fmt.Errorf("db: %w", err))
	}
	errs = append(errs, c.checkListen()...)
	errs = append(errs, c.nameErrors()...)
	return errors.Join(errs...)
}
