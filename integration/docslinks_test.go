package integration

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	mdLinkRE    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	mdHeadingRE = regexp.MustCompile(`^#{1,6} (.*)$`)
	slugDropRE  = regexp.MustCompile(`[^\p{L}\p{N}_\- ]`)
	urlSchemeRE = regexp.MustCompile(`^[a-z]+:`)
)

// headingAnchors are the anchors GitHub gives the headings of a Markdown
// text (code blocks left out): lower case, punctuation dropped, spaces as
// hyphens.
func headingAnchors(text string) map[string]bool {
	anchors := map[string]bool{}
	inFence := false
	for line := range strings.Lines(text) {
		line = strings.TrimRight(line, "\n")
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inFence = !inFence
			continue
		}
		if m := mdHeadingRE.FindStringSubmatch(line); m != nil && !inFence {
			slug := slugDropRE.ReplaceAllString(strings.ToLower(strings.TrimSpace(m[1])), "")
			anchors[strings.ReplaceAll(slug, " ", "-")] = true
		}
	}
	return anchors
}

// Every relative link of every Markdown file of the repository points to
// a file that exists, and a #fragment to a heading of the Markdown file it
// names: the manual is split over several files, and a moved section must
// not leave links behind.
func TestDocsRelativeLinks(t *testing.T) {
	t.Parallel()
	texts := markdownFiles(t)
	links := 0
	for file, text := range texts {
		for _, m := range mdLinkRE.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if urlSchemeRE.MatchString(target) {
				continue
			}
			links++
			path, fragment, _ := strings.Cut(target, "#")
			dest := file
			if path != "" {
				dest = filepath.Join(filepath.Dir(file), path)
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s: link %s: %v", file, target, err)
					continue
				}
			}
			if fragment == "" {
				continue
			}
			destText, ok := texts[filepath.Clean(dest)]
			if !ok {
				t.Errorf("%s: link %s: a #fragment of a file that is not Markdown", file, target)
				continue
			}
			if !headingAnchors(destText)[fragment] {
				t.Errorf("%s: link %s: %s has no heading with that anchor", file, target, dest)
			}
		}
	}
	if links == 0 {
		t.Fatal("no relative links found in the repository's Markdown files")
	}
	t.Logf("%d relative links checked in %d Markdown files", links, len(texts))
}
