package sqs

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// The query protocol (form-encoded Action=... requests answered in XML),
// which older SDKs and CLIs speak. A request is turned into the JSON
// input of its action, runs the same code, and the JSON answer is
// rendered as the XML those clients expect.

const queryNamespace = "http://queue.amazonaws.com/doc/2012-11-05/"

// queryParamsMax bounds the parameters of one query request.
const queryParamsMax = 2000

// queryNode is one level of dotted parameter names ("Attribute.1.Name").
type queryNode struct {
	value    string
	children map[string]*queryNode
}

func (n *queryNode) child(k string) *queryNode {
	if n.children == nil {
		n.children = map[string]*queryNode{}
	}
	c := n.children[k]
	if c == nil {
		c = &queryNode{}
		n.children[k] = c
	}
	return c
}

// indexed returns the children of a flattened list ("1", "2", ...) in
// index order.
func (n *queryNode) indexed() []*queryNode {
	type kv struct {
		i int
		n *queryNode
	}
	var out []kv
	for k, c := range n.children {
		if i, err := strconv.Atoi(k); err == nil && i > 0 {
			out = append(out, kv{i, c})
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].i < out[b].i })
	nodes := make([]*queryNode, len(out))
	for i, e := range out {
		nodes[i] = e.n
	}
	return nodes
}

func (n *queryNode) get(k string) string {
	if c := n.children[k]; c != nil {
		return c.value
	}
	return ""
}

// Flattened lists of strings and their JSON members.
var queryLists = map[string]string{
	"AttributeName": "AttributeNames", "MessageAttributeName": "MessageAttributeNames",
	"MessageSystemAttributeName": "MessageSystemAttributeNames", "TagKey": "TagKeys",
}

// Integer parameters, sent as JSON numbers.
var queryInts = map[string]bool{
	"MaxNumberOfMessages": true, "VisibilityTimeout": true, "WaitTimeSeconds": true,
	"DelaySeconds": true, "MaxResults": true, "MaxNumberOfMessagesPerSecond": true,
}

// queryToJSON turns query parameters into the JSON input of an action.
func queryToJSON(form url.Values) ([]byte, error) {
	if len(form) > queryParamsMax {
		return nil, fail(ErrInvalidParameterValue, "more than %d parameters", queryParamsMax)
	}
	root := &queryNode{}
	for k, vs := range form {
		if k == "Action" || k == "Version" || strings.HasPrefix(k, "X-Amz-") || len(vs) == 0 {
			continue
		}
		n := root
		for part := range strings.SplitSeq(k, ".") {
			n = n.child(part)
		}
		n.value = vs[0]
	}
	return json.Marshal(queryObject(root))
}

func queryObject(n *queryNode) map[string]any {
	out := map[string]any{}
	for k, c := range n.children {
		switch {
		case k == "Attribute":
			out["Attributes"] = queryMap(c, "Name", "Value")
		case k == "Tag" || k == "Tags":
			out["Tags"] = queryMap(c, "Key", "Value")
		case queryLists[k] != "":
			var l []string
			for _, e := range c.indexed() {
				l = append(l, e.value)
			}
			out[queryLists[k]] = l
		case k == "MessageAttribute" || k == "MessageSystemAttribute":
			m := map[string]any{}
			for _, e := range c.indexed() {
				v := e.child("Value")
				m[e.get("Name")] = map[string]any{"DataType": v.get("DataType"), "StringValue": v.get("StringValue"), "BinaryValue": v.get("BinaryValue")}
			}
			out[k+"s"] = m
		case strings.HasSuffix(k, "BatchRequestEntry"):
			var l []any
			for _, e := range c.indexed() {
				l = append(l, queryObject(e))
			}
			out["Entries"] = l
		case queryInts[k]:
			if i, err := strconv.Atoi(c.value); err == nil {
				out[k] = i
			} else {
				out[k] = c.value
			}
		default:
			out[k] = c.value
		}
	}
	return out
}

func queryMap(n *queryNode, key, value string) map[string]string {
	m := map[string]string{}
	for _, e := range n.indexed() {
		m[e.get(key)] = e.get(value)
	}
	return m
}

// serveQuery answers one query protocol request whose parameters are form.
func (s *Server) serveQuery(w http.ResponseWriter, hr *http.Request, form url.Values, body []byte) {
	name := form.Get("Action")
	act := actions[name]
	if act == nil {
		s.writeQueryError(w, fail(ErrInvalidAction, "the action %q is not valid for this endpoint", truncate(name, 64)))
		return
	}
	who, err := s.checkSignature(hr, body)
	if err != nil {
		s.writeQueryError(w, asError(err))
		return
	}
	in, err := queryToJSON(form)
	var checked []string
	if err == nil {
		checked, err = authorize(who.tok, name, in)
	}
	if err != nil {
		s.writeQueryError(w, asError(err))
		return
	}
	out, err := s.call(w, hr, name, act, &request{body: in, host: hr.Host, tls: hr.TLS != nil, tok: who.tok, who: who, checked: checked})
	if err != nil {
		e := asError(err)
		if !e.sender() {
			s.log.Warn("sqs request failed", "action", name, "err", err)
		}
		s.writeQueryError(w, e)
		return
	}
	var b bytes.Buffer
	b.WriteString(xml.Header)
	fmt.Fprintf(&b, "<%sResponse xmlns=%q>", name, queryNamespace)
	if out != nil {
		fmt.Fprintf(&b, "<%sResult>", name)
		if err := renderXML(&b, name, out); err != nil {
			s.writeQueryError(w, fail(ErrInternalFailure, "encoding answer: %v", err))
			return
		}
		fmt.Fprintf(&b, "</%sResult>", name)
	}
	fmt.Fprintf(&b, "<ResponseMetadata><RequestId>%s</RequestId></ResponseMetadata></%sResponse>", requestID(), name)
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b.Bytes())
}

func (s *Server) writeQueryError(w http.ResponseWriter, e *Error) {
	fault := "Sender"
	if !e.sender() {
		fault = "Receiver"
	}
	var b bytes.Buffer
	b.WriteString(xml.Header)
	fmt.Fprintf(&b, "<ErrorResponse xmlns=%q><Error><Type>%s</Type><Code>%s</Code><Message>", queryNamespace, fault, e.Code.QueryCode)
	_ = xml.EscapeText(&b, []byte(e.Message))
	fmt.Fprintf(&b, "</Message><Detail/></Error><RequestId>%s</RequestId></ErrorResponse>", requestID())
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(e.Code.Status)
	_, _ = w.Write(b.Bytes())
}

// renderXML writes the members of an action's JSON answer as the query
// protocol's XML.
func renderXML(b *bytes.Buffer, action string, out any) error {
	raw, err := json.Marshal(out)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return err
	}
	xmlObject(b, action, m)
	return nil
}

// xmlEntryNames are the element names of list members, by JSON member.
func xmlEntryName(action, member string) string {
	switch member {
	case "QueueUrls", "queueUrls":
		return "QueueUrl"
	case "Messages":
		return "Message"
	case "Failed":
		return "BatchResultErrorEntry"
	case "Successful":
		return action + "ResultEntry"
	case "Results":
		return action + "ResultEntry"
	}
	return member
}

func xmlObject(b *bytes.Buffer, action string, m map[string]any) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		switch v := m[k].(type) {
		case []any:
			name := xmlEntryName(action, k)
			for _, e := range v {
				xmlElement(b, action, name, e)
			}
		case map[string]any:
			xmlMap(b, action, k, v)
		default:
			xmlElement(b, action, k, v)
		}
	}
}

// xmlMap writes a flattened map: Attributes and Tags hold strings,
// MessageAttributes hold attribute values.
func xmlMap(b *bytes.Buffer, action, member string, m map[string]any) {
	elem, key := "Attribute", "Name"
	switch member {
	case "Tags":
		elem, key = "Tag", "Key"
	case "MessageAttributes":
		elem = "MessageAttribute"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b.WriteString("<" + elem + ">")
		xmlElement(b, action, key, k)
		xmlElement(b, action, "Value", m[k])
		b.WriteString("</" + elem + ">")
	}
}

func xmlElement(b *bytes.Buffer, action, name string, v any) {
	b.WriteString("<" + name + ">")
	switch v := v.(type) {
	case map[string]any:
		xmlObject(b, action, v)
	case string:
		_ = xml.EscapeText(b, []byte(v))
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case json.Number:
		b.WriteString(v.String())
	}
	b.WriteString("</" + name + ">")
}

// serveQueryRequest reads a query protocol request: parameters in the URL
// and, for a POST, in the form-encoded body.
func (s *Server) serveQueryRequest(w http.ResponseWriter, hr *http.Request) {
	body, err := readBody(hr)
	if err != nil {
		s.writeQueryError(w, asError(err))
		return
	}
	form, ferr := queryForm(hr, body)
	if ferr != nil {
		s.writeQueryError(w, ferr)
		return
	}
	s.serveQuery(w, hr, form, body)
}

// queryForm returns the parameters of a query request: those of the URL,
// then those of a POST's form body. Without a QueueUrl parameter, a
// request to a queue's URL names that queue (older clients do so).
func queryForm(hr *http.Request, body []byte) (url.Values, *Error) {
	form := hr.URL.Query()
	if hr.Method == http.MethodPost {
		post, err := url.ParseQuery(string(body))
		if err != nil {
			return nil, fail(ErrInvalidParameterValue, "malformed form body: %v", err)
		}
		for k, v := range post {
			form[k] = append(form[k], v...)
		}
	}
	if form.Get("QueueUrl") == "" && strings.Trim(hr.URL.Path, "/") != "" {
		form.Set("QueueUrl", hr.URL.Path)
	}
	return form, nil
}
