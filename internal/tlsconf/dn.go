package tlsconf

import (
	"crypto/x509"
	"encoding/asn1"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// rfc2253Keywords are the attribute names Java's X500Principal.getName()
// writes (sun.security.x509.AVAKeyword entries marked RFC 2253 compliant);
// every other attribute appears as its dotted OID with a #hex value. Go's
// pkix.Name.String() differs: it names more attributes (SERIALNUMBER,
// POSTALCODE) and escapes fewer characters.
var rfc2253Keywords = map[string]string{
	"2.5.4.3":                    "CN",
	"2.5.4.6":                    "C",
	"2.5.4.7":                    "L",
	"2.5.4.8":                    "ST",
	"2.5.4.10":                   "O",
	"2.5.4.11":                   "OU",
	"2.5.4.9":                    "STREET",
	"0.9.2342.19200300.100.1.25": "DC",
	"0.9.2342.19200300.100.1.1":  "UID",
}

type attributeTypeAndValue struct {
	Type  asn1.ObjectIdentifier
	Value asn1.RawValue
}

// The SET suffix makes encoding/asn1 read a SET OF.
type relativeDistinguishedNameSET []attributeTypeAndValue

// SubjectDN returns the certificate's subject as Java's
// X500Principal.getName() writes it (RFC 2253, most specific attribute
// first: "CN=alice,OU=eng,O=acme,C=US"). That is the string Kafka's
// ssl.principal.mapping.rules are matched against, so it must be the same
// to the character.
func SubjectDN(cert *x509.Certificate) (string, error) {
	return formatDN(cert.RawSubject)
}

func formatDN(der []byte) (string, error) {
	var rdns []relativeDistinguishedNameSET
	rest, err := asn1.Unmarshal(der, &rdns)
	if err != nil {
		return "", fmt.Errorf("tlsconf: subject: %w", err)
	}
	if len(rest) > 0 {
		return "", errors.New("tlsconf: subject: trailing data")
	}
	var b strings.Builder
	for i := len(rdns) - 1; i >= 0; i-- {
		if i < len(rdns)-1 {
			b.WriteByte(',')
		}
		for j, atv := range rdns[i] {
			if j > 0 {
				b.WriteByte('+')
			}
			writeAVA(&b, atv)
		}
	}
	return b.String(), nil
}

// writeAVA follows sun.security.x509.AVA.toRFC2253String.
func writeAVA(b *strings.Builder, atv attributeTypeAndValue) {
	keyword, known := rfc2253Keywords[atv.Type.String()]
	if !known {
		keyword = atv.Type.String()
	}
	b.WriteString(keyword)
	b.WriteByte('=')
	if !known || !isDirectoryString(atv.Value) {
		b.WriteByte('#')
		b.WriteString(hex.EncodeToString(atv.Value.FullBytes))
		return
	}
	// Java decodes the raw bytes as UTF-8 whatever the string type, then
	// escapes ,=+<>#;"\ anywhere (more than RFC 2253 asks), NUL as \00,
	// and leading and trailing spaces and carriage returns.
	var esc []rune
	for _, r := range strings.ToValidUTF8(string(atv.Value.Bytes), "\uFFFD") {
		switch {
		case strings.ContainsRune(`,=+<>#;"\`, r):
			esc = append(esc, '\\', r)
		case r == 0:
			esc = append(esc, '\\', '0', '0')
		default:
			esc = append(esc, r)
		}
	}
	lead, trail := 0, len(esc)-1
	for lead < len(esc) && (esc[lead] == ' ' || esc[lead] == '\r') {
		lead++
	}
	for trail >= 0 && (esc[trail] == ' ' || esc[trail] == '\r') {
		trail--
	}
	for i, r := range esc {
		if i < lead || i > trail {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
}

// isDirectoryString tells the string types Java writes as text
// (AVA.isDerString, non-canonical).
func isDirectoryString(v asn1.RawValue) bool {
	if v.Class != asn1.ClassUniversal || v.IsCompound {
		return false
	}
	switch v.Tag {
	case asn1.TagPrintableString, asn1.TagT61String, asn1.TagIA5String,
		asn1.TagGeneralString, asn1.TagBMPString, asn1.TagUTF8String:
		return true
	}
	return false
}
