package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// devtools is a Chrome DevTools Protocol session over
// --remote-debugging-pipe (fd 3 to Chromium, fd 4 back, messages ended by
// NUL). --dump-dom reads the DOM by running a script in the page, which
// prints nothing when scripts are disabled; DOM.getOuterHTML does not.
type devtools struct {
	t      *testing.T
	w      *os.File
	r      *bufio.Reader
	id     int
	events []string
}

// startDevtools runs headless Chromium (scripts disabled when script is
// false) in its own process group, killed whole when the test ends.
func startDevtools(t *testing.T, bin string, script bool) *devtools {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	toChrome, chromeIn, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	chromeOut, fromChrome, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-dev-shm-usage", "--user-data-dir=" + t.TempDir(), "--remote-debugging-pipe", "about:blank"}
	if !script {
		args = append(args, "--blink-settings=scriptEnabled=false")
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.ExtraFiles = []*os.File{toChrome, fromChrome}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	toChrome.Close()
	fromChrome.Close()
	t.Cleanup(func() {
		chromeIn.Close()
		cancel()
		_ = cmd.Wait()
		chromeOut.Close()
	})
	return &devtools{t: t, w: chromeIn, r: bufio.NewReader(chromeOut)}
}

type cdpMessage struct {
	ID     int             `json:"id"`
	Method string          `json:"method"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Message string `json:"message"`
	} `json:"error"`
}

func (d *devtools) read() cdpMessage {
	d.t.Helper()
	b, err := d.r.ReadBytes(0)
	if err != nil {
		d.t.Fatalf("devtools pipe: %v", err)
	}
	var m cdpMessage
	if err := json.Unmarshal(b[:len(b)-1], &m); err != nil {
		d.t.Fatalf("devtools message %q: %v", b, err)
	}
	return m
}

// call sends one command and returns its result into out, remembering the
// events that arrive meanwhile.
func (d *devtools) call(session, method string, params map[string]any, out any) {
	d.t.Helper()
	d.id++
	msg := map[string]any{"id": d.id, "method": method, "params": params}
	if session != "" {
		msg["sessionId"] = session
	}
	b, _ := json.Marshal(msg)
	if _, err := d.w.Write(append(b, 0)); err != nil {
		d.t.Fatalf("devtools %s: %v", method, err)
	}
	for {
		m := d.read()
		if m.Method != "" {
			d.events = append(d.events, m.Method)
			continue
		}
		if m.ID != d.id {
			continue
		}
		if m.Error != nil {
			d.t.Fatalf("devtools %s: %s", method, m.Error.Message)
		}
		if out != nil {
			if err := json.Unmarshal(m.Result, out); err != nil {
				d.t.Fatalf("devtools %s result: %v", method, err)
			}
		}
		return
	}
}

func (d *devtools) waitEvent(method string) {
	d.t.Helper()
	for i, e := range d.events {
		if e == method {
			d.events = d.events[i+1:]
			return
		}
	}
	for {
		if m := d.read(); m.Method == method {
			d.events = nil
			return
		}
	}
}

// load opens url in a new tab and returns the tab's session, its target
// (for closeTarget) and the document's node once the load event fired.
func (d *devtools) load(url string) (session, target string, root int) {
	d.t.Helper()
	var tg struct{ TargetID string }
	d.call("", "Target.createTarget", map[string]any{"url": "about:blank"}, &tg)
	var attached struct{ SessionID string }
	d.call("", "Target.attachToTarget", map[string]any{"targetId": tg.TargetID, "flatten": true}, &attached)
	s := attached.SessionID
	d.call(s, "Page.enable", nil, nil)
	d.events = nil
	d.call(s, "Page.navigate", map[string]any{"url": url}, nil)
	d.waitEvent("Page.loadEventFired")
	var doc struct{ Root struct{ NodeID int } }
	d.call(s, "DOM.getDocument", map[string]any{"depth": 0}, &doc)
	return s, tg.TargetID, doc.Root.NodeID
}

// outerHTML loads url in a new tab and returns the document's DOM once the
// load event fired.
func (d *devtools) outerHTML(url string) string {
	d.t.Helper()
	s, target, root := d.load(url)
	var html struct{ OuterHTML string }
	d.call(s, "DOM.getOuterHTML", map[string]any{"nodeId": root}, &html)
	d.call("", "Target.closeTarget", map[string]any{"targetId": target}, nil)
	return html.OuterHTML
}

// boxes loads url in a new tab and returns the laid-out size in CSS
// pixels of every element selector matches: proof that the browser drew
// them, not only parsed them (DOM.getBoxModel needs no script).
func (d *devtools) boxes(url, selector string) [][2]float64 {
	d.t.Helper()
	s, target, root := d.load(url)
	var found struct{ NodeIDs []int }
	d.call(s, "DOM.querySelectorAll", map[string]any{"nodeId": root, "selector": selector}, &found)
	var out [][2]float64
	for _, id := range found.NodeIDs {
		var box struct {
			Model struct{ Width, Height float64 }
		}
		d.call(s, "DOM.getBoxModel", map[string]any{"nodeId": id}, &box)
		out = append(out, [2]float64{box.Model.Width, box.Model.Height})
	}
	d.call("", "Target.closeTarget", map[string]any{"targetId": target}, nil)
	return out
}

// TestDevtoolsScriptsDisabled checks the no-JavaScript browser really runs
// no script, so the status page tests using it mean what they say.
func TestDevtoolsScriptsDisabled(t *testing.T) {
	bin := chromiumPath(t)
	page := "data:text/html,<p id=x>static</p><script>document.getElementById('x').textContent='script ran'</script>"
	for _, script := range []bool{true, false} {
		d := startDevtools(t, bin, script)
		dom := d.outerHTML(page)
		want := map[bool]string{true: ">script ran</p>", false: ">static</p>"}[script]
		if !strings.Contains(dom, want) {
			t.Errorf("scripts enabled=%v: DOM %s lacks %s", script, dom, want)
		}
	}
}
