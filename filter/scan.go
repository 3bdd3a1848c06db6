package filter

import (
	"errors"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// This file holds the one JSON reader the package uses, for filters and for
// payloads alike: a recursive-descent scanner over bytes that validates
// everything it passes over (RFC 8259, as encoding/json.Valid does) but
// decodes only the values asked for. A payload is read once per Match (or
// once per row in NewColumns), skipping the fields no expression reads.

// maxDepth bounds JSON nesting (arrays and objects) in a payload or a
// filter, so that a hostile input cannot exhaust the stack.
const maxDepth = 512

// syntaxError reports malformed JSON; the offset says where.
type syntaxError struct {
	off int
	msg string
}

func (e *syntaxError) Error() string {
	return "invalid JSON at offset " + strconv.Itoa(e.off) + ": " + e.msg
}

var errDepth = errors.New("nested too deeply")

// scanner walks one JSON text.
type scanner struct {
	data  []byte
	pos   int
	depth int
	err   error
}

func (s *scanner) fail(msg string) {
	if s.err == nil {
		s.err = &syntaxError{s.pos, msg}
	}
}

func (s *scanner) ws() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// peek returns the next byte after white space, or 0 at the end.
func (s *scanner) peek() byte {
	s.ws()
	if s.pos < len(s.data) {
		return s.data[s.pos]
	}
	return 0
}

// expect consumes c after white space.
func (s *scanner) expect(c byte) bool {
	if s.peek() != c {
		if s.pos >= len(s.data) {
			s.fail("unexpected end, want " + strconv.QuoteRune(rune(c)))
		} else {
			s.fail("unexpected " + strconv.QuoteRune(rune(s.data[s.pos])) + ", want " + strconv.QuoteRune(rune(c)))
		}
		return false
	}
	s.pos++
	return true
}

// end checks that only white space follows the top-level value.
func (s *scanner) end() bool {
	if s.err != nil {
		return false
	}
	if s.peek() != 0 || s.pos < len(s.data) {
		s.fail("data after the value")
		return false
	}
	return true
}

func (s *scanner) enter() bool {
	s.depth++
	if s.depth > maxDepth {
		if s.err == nil {
			s.err = &syntaxError{s.pos, errDepth.Error()}
		}
		return false
	}
	return true
}

// skip validates and passes over one value.
func (s *scanner) skip() bool {
	switch c := s.peek(); c {
	case '{':
		return s.object(func(key []byte) bool { return s.skip() })
	case '[':
		return s.array(func(int) bool { return s.skip() })
	case '"':
		_, ok := s.str(nil)
		return ok
	case 't', 'f', 'n':
		_, ok := s.literal()
		return ok
	default:
		_, ok := s.number()
		return ok
	}
}

// object reads an object, calling each with every key (decoded; valid only
// until the next string is read) with the scanner before its value; each
// must consume the value.
func (s *scanner) object(each func(key []byte) bool) bool {
	if !s.expect('{') || !s.enter() {
		return false
	}
	if s.peek() == '}' {
		s.pos++
		s.depth--
		return true
	}
	for {
		if s.peek() != '"' {
			s.fail("want a string key")
			return false
		}
		key, ok := s.str(nil)
		if !ok || !s.expect(':') || !each(key) {
			return false
		}
		switch s.peek() {
		case ',':
			s.pos++
		case '}':
			s.pos++
			s.depth--
			return true
		default:
			s.fail("want ',' or '}' in an object")
			return false
		}
	}
}

// array reads an array, calling each with every element's index, the
// scanner before the element; each must consume it.
func (s *scanner) array(each func(i int) bool) bool {
	if !s.expect('[') || !s.enter() {
		return false
	}
	if s.peek() == ']' {
		s.pos++
		s.depth--
		return true
	}
	for i := 0; ; i++ {
		if !each(i) {
			return false
		}
		switch s.peek() {
		case ',':
			s.pos++
		case ']':
			s.pos++
			s.depth--
			return true
		default:
			s.fail("want ',' or ']' in an array")
			return false
		}
	}
}

// str reads a string. Without escapes it returns a slice of the input;
// with escapes it decodes into buf (lone surrogates become U+FFFD, as in
// encoding/json). Bytes that are not UTF-8 pass through unchanged.
func (s *scanner) str(buf []byte) ([]byte, bool) {
	s.pos++ // the opening quote, checked by the caller
	start := s.pos
	d := s.data
	for s.pos < len(d) {
		c := d[s.pos]
		if c == '"' {
			out := d[start:s.pos]
			s.pos++
			return out, true
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			s.fail("control character in a string")
			return nil, false
		}
		s.pos++
	}
	buf = append(buf, d[start:s.pos]...)
	for s.pos < len(d) {
		c := d[s.pos]
		switch {
		case c == '"':
			s.pos++
			return buf, true
		case c < 0x20:
			s.fail("control character in a string")
			return nil, false
		case c != '\\':
			buf = append(buf, c)
			s.pos++
			continue
		}
		if s.pos+1 >= len(d) {
			break
		}
		e := d[s.pos+1]
		s.pos += 2
		switch e {
		case '"', '\\', '/':
			buf = append(buf, e)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, ok := s.hex4()
			if !ok {
				return nil, false
			}
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if s.pos+1 < len(d) && d[s.pos] == '\\' && d[s.pos+1] == 'u' {
					save := s.pos
					s.pos += 2
					var ok2 bool
					if r2, ok2 = s.hex4(); !ok2 {
						return nil, false
					}
					if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
						buf = utf8.AppendRune(buf, dec)
						continue
					}
					s.pos = save
				}
				r = utf8.RuneError
			}
			buf = utf8.AppendRune(buf, r)
		default:
			s.pos -= 2
			s.fail("invalid escape in a string")
			return nil, false
		}
	}
	s.fail("unterminated string")
	return nil, false
}

func (s *scanner) hex4() (rune, bool) {
	if s.pos+4 > len(s.data) {
		s.fail("short \\u escape")
		return 0, false
	}
	var r rune
	for _, c := range s.data[s.pos : s.pos+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			s.fail("invalid \\u escape")
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	s.pos += 4
	return r, true
}

// literal reads true, false or null.
func (s *scanner) literal() (value, bool) {
	for _, l := range [...]struct {
		text string
		v    value
	}{{"true", value{k: kindBool, b: true}}, {"false", value{k: kindBool}}, {"null", value{k: kindNull}}} {
		if len(s.data)-s.pos >= len(l.text) && string(s.data[s.pos:s.pos+len(l.text)]) == l.text {
			s.pos += len(l.text)
			return l.v, true
		}
	}
	s.fail("invalid literal")
	return value{}, false
}

// number reads a number as float64; one beyond float64's range becomes
// ±Inf (so it still orders above or below every finite number).
func (s *scanner) number() (float64, bool) {
	d := s.data
	start := s.pos
	p := s.pos
	if p < len(d) && d[p] == '-' {
		p++
	}
	switch {
	case p < len(d) && d[p] == '0':
		p++
	case p < len(d) && '1' <= d[p] && d[p] <= '9':
		for p < len(d) && '0' <= d[p] && d[p] <= '9' {
			p++
		}
	default:
		s.pos = p
		if p >= len(d) {
			s.fail("unexpected end, want a value")
		} else {
			s.fail("unexpected " + strconv.QuoteRune(rune(d[p])) + ", want a value")
		}
		return 0, false
	}
	if p < len(d) && d[p] == '.' {
		p++
		q := p
		for p < len(d) && '0' <= d[p] && d[p] <= '9' {
			p++
		}
		if p == q {
			s.pos = p
			s.fail("want a digit after '.'")
			return 0, false
		}
	}
	if p < len(d) && (d[p] == 'e' || d[p] == 'E') {
		p++
		if p < len(d) && (d[p] == '+' || d[p] == '-') {
			p++
		}
		q := p
		for p < len(d) && '0' <= d[p] && d[p] <= '9' {
			p++
		}
		if p == q {
			s.pos = p
			s.fail("want a digit in an exponent")
			return 0, false
		}
	}
	s.pos = p
	text := d[start:p]
	f, err := strconv.ParseFloat(unsafe.String(unsafe.SliceData(text), len(text)), 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		s.fail("invalid number")
		return 0, false
	}
	return f, true
}

// scalar reads a string, number, boolean or null into v; str holds a
// string's bytes (a slice of the input or of buf).
func (s *scanner) scalar(buf []byte) (v value, ok bool) {
	switch c := s.peek(); c {
	case '"':
		b, ok := s.str(buf)
		return value{k: kindStr, s: b}, ok
	case 't', 'f', 'n':
		return s.literal()
	default:
		f, ok := s.number()
		return value{k: kindNum, n: f}, ok
	}
}
