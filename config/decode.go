package config

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Error is one problem in a config file, located by line and column so a
// user can jump straight to it.
type Error struct {
	File   string
	Line   int
	Column int
	// Path is the key path in the document, e.g. targets[2].protocol.
	Path string
	Msg  string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	switch {
	case e.Line > 0 && e.Column > 0:
		fmt.Fprintf(&b, ":%d:%d", e.Line, e.Column)
	case e.Line > 0:
		// YAML syntax errors know the line only.
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// decoder walks a yaml.Node tree into Go values by reflection. yaml.v3's own
// strict mode reports unknown keys with a line but without a column or the
// key path, and validation after decoding has lost positions altogether; this
// walker keeps the position of every key path so that validation can point at
// the offending key too.
type decoder struct {
	file      string
	positions map[string]*yaml.Node
	errs      []error
}

// maxErrors bounds how many problems one load reports; past it the rest are
// most likely consequences of the first ones.
const maxErrors = 20

func (d *decoder) errorf(n *yaml.Node, path, format string, args ...any) {
	if len(d.errs) >= maxErrors {
		return
	}
	e := &Error{File: d.file, Path: path, Msg: fmt.Sprintf(format, args...)}
	if n != nil {
		e.Line, e.Column = n.Line, n.Column
	}
	d.errs = append(d.errs, e)
}

// at reports an error located at the node recorded for path, or at the
// nearest recorded parent when the key itself is absent (a missing key).
func (d *decoder) at(path, format string, args ...any) {
	d.errorf(d.lookup(path), path, format, args...)
}

func (d *decoder) lookup(path string) *yaml.Node {
	for p := path; ; {
		if n, ok := d.positions[p]; ok {
			return n
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			return d.positions[""]
		}
		p = p[:i]
	}
}

func (d *decoder) err() error { return errors.Join(d.errs...) }

// obsoleteUnmarshaler is the yaml.v2-style interface that prometheus/common
// types (Duration, Secret, TLSVersion) implement; yaml.v3 still honours it.
type obsoleteUnmarshaler interface {
	UnmarshalYAML(unmarshal func(any) error) error
}

// scalarShorthand lets a struct also be written as a single scalar, e.g.
// `max_tokens: 128` for `max_tokens: {distribution: constant, mean: 128}`.
type scalarShorthand interface {
	fromScalar(n *yaml.Node) error
}

// validator is run after a struct was walked, so library types such as
// prometheus/common's TLSConfig keep their own consistency checks.
type validator interface {
	Validate() error
}

var (
	unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()
	obsoleteType    = reflect.TypeFor[obsoleteUnmarshaler]()
	shorthandType   = reflect.TypeFor[scalarShorthand]()
	validatorType   = reflect.TypeFor[validator]()
)

func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind == yaml.DocumentNode {
		if len(n.Content) == 0 {
			return
		}
		n = n.Content[0]
	}
	if n.Kind == yaml.AliasNode {
		d.errorf(n, path, "YAML aliases are not supported in llm-prober configs; write the value out")
		return
	}
	d.positions[path] = n
	if n.Tag == "!!null" {
		return
	}
	if v.Kind() == reflect.Struct && v.CanAddr() {
		ptr := v.Addr()
		if scalarStructs[v.Type()] {
			// Library structs that are written as one scalar (a URL).
			if n.Kind != yaml.ScalarNode {
				d.errorf(n, path, "want a single value, got %s", describe(n))
				return
			}
			if err := n.Decode(ptr.Interface()); err != nil {
				d.errorf(n, path, "%s", cleanYAMLError(err))
			}
			return
		}
		if ptr.Type().Implements(unmarshalerType) {
			// Our own value types (Rate, Cron) are structs that decode
			// and parse themselves from one scalar. Library structs
			// implement only the obsolete interface and are walked.
			if err := ptr.Interface().(yaml.Unmarshaler).UnmarshalYAML(n); err != nil {
				d.errorf(n, path, "%s", err)
			}
			return
		}
		if n.Kind == yaml.ScalarNode && ptr.Type().Implements(shorthandType) {
			if err := ptr.Interface().(scalarShorthand).fromScalar(n); err != nil {
				d.errorf(n, path, "%s", err)
			}
			return
		}
		// Structs are always walked key by key, even when they bring their
		// own UnmarshalYAML, because those decode leniently: unknown keys
		// would pass silently. The defaults such an UnmarshalYAML would
		// set are therefore skipped; structPresets sets ours instead.
		if preset := structPresets[v.Type()]; preset != nil {
			preset(ptr.Interface())
		}
		before := len(d.errs)
		d.decodeStruct(n, v, path)
		if len(d.errs) == before && ptr.Type().Implements(validatorType) {
			if err := ptr.Interface().(validator).Validate(); err != nil {
				d.errorf(n, path, "%s", err)
			}
		}
		return
	}
	// Scalar types with their own YAML decoding (durations, secrets) decode
	// themselves; their errors still get our position and path.
	if v.CanAddr() && (v.Addr().Type().Implements(unmarshalerType) || v.Addr().Type().Implements(obsoleteType)) {
		if err := n.Decode(v.Addr().Interface()); err != nil {
			msg := cleanYAMLError(err)
			if strings.Contains(msg, "duration") {
				msg += "; use a duration such as 500ms, 15s or 1m"
			}
			d.errorf(n, path, "%s", msg)
		}
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		d.decode(n, v.Elem(), path)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.errorf(n, path, "want a list, got %s", describe(n))
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, item := range n.Content {
			d.decode(item, s.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
		v.Set(s)
	case reflect.Map:
		d.decodeMap(n, v, path)
	case reflect.Interface:
		var x any
		if err := n.Decode(&x); err != nil {
			d.errorf(n, path, "%s", cleanYAMLError(err))
			return
		}
		if x != nil {
			v.Set(reflect.ValueOf(x))
		}
	default:
		if n.Kind != yaml.ScalarNode {
			d.errorf(n, path, "want a single %s value, got %s", kindName(v.Kind()), describe(n))
			return
		}
		if err := n.Decode(v.Addr().Interface()); err != nil {
			d.errorf(n, path, "want a %s, got %q", kindName(v.Kind()), n.Value)
		}
	}
}

func (d *decoder) decodeStruct(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.errorf(n, path, "want a mapping of keys, got %s", describe(n))
		return
	}
	fields := yamlFields(v.Type())
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, val := n.Content[i], n.Content[i+1]
		keyPath := join(path, key.Value)
		if seen[key.Value] {
			d.errorf(key, keyPath, "key %q appears twice in the same mapping", key.Value)
			continue
		}
		seen[key.Value] = true
		idx, ok := fields[key.Value]
		if !ok {
			d.errorf(key, keyPath, "unknown key %q; allowed keys here: %s", key.Value, strings.Join(allowedKeys(v.Type(), fields), ", "))
			continue
		}
		if hint, refused := refusedKeys[v.Type()][key.Value]; refused {
			d.errorf(key, keyPath, "%q is not supported by llm-prober; %s", key.Value, hint)
			continue
		}
		f := v.Type().FieldByIndex(idx)
		if f.Tag.Get("config") == "output-only" {
			// check-config --print and /config write a resolved secret as
			// the marker <secret>; reading that output back must work, and
			// the value is resolved again from its own source (api_key_file,
			// api_key_env), so the marker is skipped. Any other value is a
			// secret written inline and refused.
			if val.Kind == yaml.ScalarNode && val.Value == redactedMarker {
				continue
			}
			d.errorf(key, keyPath, "%q cannot be set in the file; %s", key.Value, f.Tag.Get("hint"))
			continue
		}
		d.positions[keyPath] = key
		d.decode(val, v.FieldByIndex(idx), keyPath)
		// Keep the key's own position for error messages about the key.
		d.positions[keyPath] = key
	}
}

func (d *decoder) decodeMap(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.errorf(n, path, "want a mapping, got %s", describe(n))
		return
	}
	if v.Type().Key().Kind() != reflect.String {
		d.errorf(n, path, "internal error: map keys must be strings")
		return
	}
	if v.IsNil() {
		v.Set(reflect.MakeMap(v.Type()))
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, val := n.Content[i], n.Content[i+1]
		keyPath := join(path, key.Value)
		if v.MapIndex(reflect.ValueOf(key.Value)).IsValid() {
			d.errorf(key, keyPath, "key %q appears twice in the same mapping", key.Value)
			continue
		}
		elem := reflect.New(v.Type().Elem()).Elem()
		d.decode(val, elem, keyPath)
		d.positions[keyPath] = key
		v.SetMapIndex(reflect.ValueOf(key.Value).Convert(v.Type().Key()), elem)
	}
}

// yamlFields maps each key a struct takes to the index path of its field.
// The keys of an embedded struct marked `yaml:",inline"` (prometheus/common's
// ProxyConfig inside HTTPClientConfig) are the struct's own keys, as yaml.v3
// has them; a key of the outer struct wins over an inline one of the same
// name.
func yamlFields(t reflect.Type) map[string][]int {
	fields := map[string][]int{}
	var inline [][]int
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" && slices.Contains(strings.Split(opts, ","), "inline") {
			// Inline maps (catch-all keys) are not supported: their keys
			// would be unknown keys here.
			if f.Type.Kind() == reflect.Struct {
				inline = append(inline, []int{i})
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		fields[name] = []int{i}
	}
	for _, idx := range inline {
		for name, sub := range yamlFields(t.Field(idx[0]).Type) {
			if _, taken := fields[name]; !taken {
				fields[name] = append(slices.Clone(idx), sub...)
			}
		}
	}
	return fields
}

// allowedKeys lists the keys of a struct for messages, without the
// library keys that refusedKeys turns away.
func allowedKeys(t reflect.Type, m map[string][]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		if _, refused := refusedKeys[t][k]; !refused {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	case yaml.ScalarNode:
		return strconv.Quote(n.Value)
	}
	return "something else"
}

func kindName(k reflect.Kind) string {
	switch k {
	case reflect.Bool:
		return "boolean (true or false)"
	case reflect.String:
		return "string"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "whole number"
	}
	return k.String()
}

// cleanYAMLError strips yaml.v3's "yaml: unmarshal errors:\n  line N:"
// wrapping, since our own message already carries the position.
func cleanYAMLError(err error) string {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "yaml: unmarshal errors:\n")
	msg = strings.TrimPrefix(strings.TrimSpace(msg), "yaml: ")
	if strings.HasPrefix(msg, "line ") {
		if _, rest, ok := strings.Cut(msg, ": "); ok {
			msg = rest
		}
	}
	return msg
}

func reflectValue(v any) reflect.Value { return reflect.ValueOf(v).Elem() }
