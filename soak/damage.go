package soak

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// A durable file is one a run leaves for the next process to rely on: an
// object in durable shared storage, or a file the sink keeps in the output
// directory (the idempotent store and its log, staged and visible part files, the run
// record). Its kind is its path with every number replaced by N, below the
// run's directory in storage: "storage chk-N/_metadata", "output
// _staging/eN-sN-aN-pN.csv". Kinds come from paths, so a new file of any
// executor is damaged too without the campaign knowing it.

// DurableFile is one file that damage may be done to.
type DurableFile struct {
	Path string // absolute
	Kind string
	// Names are the ways an error line may name it: its path, its key in
	// storage or in the output directory, and its last two elements.
	Names []string
}

var (
	digits       = regexp.MustCompile(`[0-9]+`)
	hexRuns      = regexp.MustCompile(`[0-9a-f]{8,}`)
	leadingZeros = regexp.MustCompile(`(^|[^0-9])0+([0-9])`)
)

// kindOf is a path with its numbers made N and its hashes H, so files
// that differ only in those are one kind: damage is drawn per kind, and a
// kind per hashed file name (the destination's receipts) would both
// crowd the report and draw them far more often than any other file.
func kindOf(path string) string {
	path = hexRuns.ReplaceAllStringFunc(path, func(h string) string {
		if strings.ContainsAny(h, "abcdef") {
			return "H"
		}
		return h
	})
	return digits.ReplaceAllString(path, "N")
}

// DurableFiles lists the durable files of run runID in store (a local
// storage directory; "" for none) and out, by kind.
func DurableFiles(store, out, runID string) (map[string][]DurableFile, error) {
	kinds := map[string][]DurableFile{}
	add := func(root, where string, keep func(rel string) (kindPath string, ok bool)) error {
		return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				if os.IsNotExist(err) {
					return nil
				}
				return err
			}
			if d.IsDir() || strings.HasPrefix(d.Name(), ".") {
				return nil // hidden files are temporaries, not relied on
			}
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			kp, ok := keep(rel)
			if !ok {
				return nil
			}
			f := DurableFile{Path: path, Kind: where + " " + kindOf(kp), Names: []string{path, rel}}
			parts := strings.Split(rel, "/")
			last := parts[max(0, len(parts)-2):]
			f.Names = append(f.Names, strings.Join(last, "/"))
			// Errors may print a numbered name as its number:
			// offsets/00000000000000000001 as offsets/1.
			short := strings.Join(last, "/")
			short = leadingZeros.ReplaceAllString(short, "${1}${2}")
			if short != f.Names[len(f.Names)-1] {
				f.Names = append(f.Names, short)
			}
			kinds[f.Kind] = append(kinds[f.Kind], f)
			return nil
		})
	}
	if store != "" {
		err := add(store, "storage", func(rel string) (string, bool) {
			_, after, ok := strings.Cut(rel, "/"+runID+"/")
			return after, ok
		})
		if err != nil {
			return nil, err
		}
	}
	err := add(out, "output", func(rel string) (string, bool) {
		return rel, !strings.HasSuffix(rel, ".lock") // a lock holds nothing
	})
	return kinds, err
}

// Damaged is damage done: to which file, and how.
type Damaged struct {
	File   DurableFile
	Action string
	At     int64 // the byte flipped
}

func (d Damaged) String() string {
	return fmt.Sprintf("%s of %s (%s)", d.Action, d.File.Names[1], d.File.Kind)
}

// Shell is the command that does the same damage by hand.
func (d Damaged) Shell() string {
	p := shellQuote(d.File.Path)
	switch {
	case d.Action == "truncate-0":
		return "truncate -s 0 " + p
	case d.Action == "truncate-half":
		return fmt.Sprintf("truncate -s $(( $(stat -c %%s %s) / 2 )) %s", p, p)
	case d.Action == "delete":
		return "rm " + p
	}
	// flip: the byte at At, XOR 0xff.
	return fmt.Sprintf(`printf "$(printf '\\%%03o' $(( $(od -An -tu1 -j %d -N1 %s) ^ 255 )))" | dd of=%s bs=1 seek=%d conv=notrunc status=none`, d.At, p, p, d.At)
}

// Apply does dm to one of the files, chosen as dm says; ok is false when
// there is no durable file at all.
func (dm Damage) Apply(files map[string][]DurableFile) (Damaged, bool, error) {
	if len(files) == 0 {
		return Damaged{}, false, nil
	}
	kinds := make([]string, 0, len(files))
	for k := range files {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	of := slices.Clone(files[kinds[dm.Kind%len(kinds)]])
	sort.Slice(of, func(i, j int) bool { return of[i].Path < of[j].Path })
	f := of[dm.Pick%len(of)]
	if dm.Newest {
		f = of[len(of)-1]
	}
	done := Damaged{File: f, Action: dm.Action}
	fi, err := os.Stat(f.Path)
	if err != nil {
		return done, true, err
	}
	switch dm.Action {
	case "truncate-0":
		err = os.Truncate(f.Path, 0)
	case "truncate-half":
		err = os.Truncate(f.Path, fi.Size()/2)
	case "delete":
		err = os.Remove(f.Path)
	case "flip":
		if fi.Size() == 0 {
			done.Action = "delete" // an empty file has no byte to flip
			err = os.Remove(f.Path)
			break
		}
		at := dm.At % fi.Size()
		done.Action, done.At = fmt.Sprintf("flip byte %d of %d", at, fi.Size()), at
		err = flipByte(f.Path, at)
	default:
		err = fmt.Errorf("unknown damage %q", dm.Action)
	}
	return done, true, err
}

func flipByte(path string, at int64) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, at); err != nil {
		f.Close()
		return err
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b, at); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// NamedIn says whether one of lines names the damaged file.
func (d Damaged) NamedIn(lines []string) bool {
	for _, l := range lines {
		for _, n := range d.File.Names {
			if strings.Contains(l, n) {
				return true
			}
		}
	}
	return false
}
