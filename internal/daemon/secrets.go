package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/drover-dev/drover/internal/cli"
	"github.com/drover-dev/drover/internal/datadir"
	"github.com/drover-dev/drover/internal/sealing"
	"github.com/drover-dev/drover/internal/store/postgres"
	"github.com/drover-dev/drover/internal/store/sqlite"
)

// secretsKeyFile is the keyring a data directory's server makes for its own
// SQLite store when given none.
const secretsKeyFile = "secrets.key"

// keyring is the keyring that seals config bodies and desired states at
// rest: --secrets-key-file, else DROVER_SECRETS_KEY, else (the data
// directory's own store) DATA/secrets.key, made at the first start. A
// PostgreSQL store needs one given: every replica must hold the same.
func (f *serverFlags) keyring(log *slog.Logger) (*sealing.Keyring, error) {
	text, from := os.Getenv("DROVER_SECRETS_KEY"), "DROVER_SECRETS_KEY"
	if f.secretsKeyFile != "" {
		b, err := os.ReadFile(f.secretsKeyFile)
		if err != nil {
			return nil, cli.UsageErrorf("--secrets-key-file: %w", err)
		}
		text, from = string(b), f.secretsKeyFile
	}
	if text == "" {
		if f.database != "" {
			return nil, cli.UsageErrorf("--database needs the keyring that seals secret values at rest, the same on every replica: " +
				"--secrets-key-file FILE or DROVER_SECRETS_KEY (drover admin new-key prints a key)")
		}
		path := filepath.Join(f.data, secretsKeyFile)
		b, err := ownKeyring(path, log)
		if err != nil {
			return nil, fmt.Errorf("the data directory's keyring: %w", err)
		}
		text, from = string(b), path
	}
	k, err := sealing.ParseKeyring(text)
	if err != nil {
		return nil, cli.UsageErrorf("%s: %w", from, err)
	}
	return k, nil
}

// ownKeyring reads the keyring at path, making it (0600, one new key) when
// there is none.
func ownKeyring(path string, log *slog.Logger) ([]byte, error) {
	b, err := os.ReadFile(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return b, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	fh, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return os.ReadFile(path) // another start made it
	}
	if err != nil {
		return nil, err
	}
	key := sealing.NewKey() + "\n"
	if _, err := fh.WriteString(key); err != nil {
		_ = fh.Close()
		return nil, err
	}
	if err := fh.Sync(); err != nil {
		_ = fh.Close()
		return nil, err
	}
	if err := fh.Close(); err != nil {
		return nil, err
	}
	log.Info("created the keyring that seals secret values at rest; keep a copy apart from the database", "path", path)
	return []byte(key), nil
}

func newAdminNewKeyCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "new-key",
		Short: "Print a new key for the keyring that seals secret values at rest",
		Long: `New-key prints a random key, a line of the keyring drover server reads from
--secrets-key-file or DROVER_SECRETS_KEY. To rotate, put the new key first in
the keyring (the old one after it: values sealed with it stay readable),
restart the servers, run drover admin reseal, then drop the old key.`,
		Example: `  drover admin new-key > /etc/drover/secrets.key
  { drover admin new-key; cat /etc/drover/secrets.key; } > secrets.key.new`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintln(cmd.OutOrStdout(), sealing.NewKey())
			return nil
		},
	}
}

func newAdminResealCmd() *cobra.Command {
	var (
		f       adminStore
		keyFile string
	)
	cmd := &cobra.Command{
		Use:   "reseal",
		Short: "Seal every stored secret value again with the keyring's first key",
		Long: `Reseal encrypts again, with the first key of the keyring, every config body,
every desired state's parameters and compiled form and every secret's value
(drover secrets set) that another key sealed (or that was stored before
sealing), so the keyring's older keys can go. The
keyring is --secrets-key-file, else DROVER_SECRETS_KEY, else the data
directory's secrets.key. Stop the data directory's server first.`,
		Example: `  drover admin reseal --data /var/lib/drover
  drover admin reseal --database postgres://drover@db.internal/drover --secrets-key-file /etc/drover/secrets.key`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.check(cmd); err != nil {
				return err
			}
			sf := &serverFlags{data: f.data, database: f.database, secretsKeyFile: keyFile}
			if sf.secretsKeyFile == "" && os.Getenv("DROVER_SECRETS_KEY") == "" && f.database == "" {
				sf.secretsKeyFile = filepath.Join(f.data, secretsKeyFile)
			}
			log := adminLog(cmd.ErrOrStderr())
			keys, err := sf.keyring(log)
			if err != nil {
				return err
			}
			var (
				n    int
				rerr error
			)
			if f.database != "" {
				pg, err := postgres.Open(cmd.Context(), f.database, postgres.WithSealer(keys))
				if err != nil {
					return fmt.Errorf("reseal: open the PostgreSQL store: %w", err)
				}
				n, rerr = pg.Reseal(cmd.Context())
				_ = pg.Close()
			} else {
				lock, sq, err := openDataDir(cmd.Context(), f.data, log, sqlite.WithSealer(keys))
				if err != nil {
					var inUse *datadir.InUseError
					if errors.As(err, &inUse) {
						return serverRunning("reseal", inUse)
					}
					return fmt.Errorf("reseal: %w", err)
				}
				n, rerr = sq.Reseal(cmd.Context())
				_ = sq.Close()
				_ = lock.Release()
			}
			if rerr != nil {
				return rerr
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "resealed %d values of %s with key %s\n", n, f.describe(), keys.KeyID())
			return nil
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&keyFile, "secrets-key-file", "", "the keyring (env DROVER_SECRETS_KEY; default: the data directory's secrets.key)")
	return cmd
}
