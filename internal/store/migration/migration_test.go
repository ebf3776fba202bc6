package migration

import (
	"testing"
	"testing/fstest"
)

func TestLoad(t *testing.T) {
	t.Parallel()
	fsys := fstest.MapFS{
		"m/0001_init.sql": &fstest.MapFile{Data: []byte("CREATE TABLE a (x INT);")},
		"m/0002_more.sql": &fstest.MapFile{Data: []byte("CREATE TABLE b (x INT);")},
		"m/README":        &fstest.MapFile{},
	}
	ms, err := Load(fsys, "m")
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 2 || ms[1] != (Migration{Version: 2, Name: "0002_more.sql", SQL: "CREATE TABLE b (x INT);"}) {
		t.Errorf("Load = %+v", ms)
	}
}

func TestLoadRejectsBadNames(t *testing.T) {
	t.Parallel()
	for name, files := range map[string][]string{
		"gap":       {"0001_a.sql", "0003_c.sql"},
		"duplicate": {"0001_a.sql", "0001_b.sql"},
		"no number": {"init.sql"},
		"zero":      {"0000_a.sql"},
		"none":      nil,
	} {
		fsys := fstest.MapFS{"m/README": &fstest.MapFile{}}
		for _, f := range files {
			fsys["m/"+f] = &fstest.MapFile{Data: []byte("SELECT 1;")}
		}
		if _, err := Load(fsys, "m"); err == nil {
			t.Errorf("%s: Load(%v) succeeded", name, files)
		}
	}
}
