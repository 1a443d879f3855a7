import CastSignaling
import Testing
@testable import CastDaemon

/// Issue 19: `--json` lines and `doctor --json` without JSONSerialization.
@Suite struct JSONLineTests {
    @Test func mixedValuesBecomeOneLineWithSortedKeysAndNulls() {
        let missing: String? = nil
        let present: String? = "x264"
        let object: [String: Any] = [
            "name": "a/b \"q\"", "on": true, "n": 42, "big": UInt32.max, "rate": 2.5,
            "list": ["x", "y"], "nested": ["k": 1, "none": JSONValue.null],
            "missing": missing as Any, "present": present as Any,
        ]
        #expect(JSONLine.encode(object)
                == #"{"big":4294967295,"list":["x","y"],"missing":null,"n":42,"name":"a/b \"q\"","nested":{"k":1,"none":null},"on":true,"present":"x264","rate":2.5}"#)
    }

    @Test func aValueThatIsNotJSONMakesNoLine() {
        struct Opaque {}
        #expect(JSONLine.encode(["x": Opaque()]) == nil)
        #expect(JSONLine.encode(["x": [1, Opaque()] as [Any]]) == nil)
        #expect(JSONLine.encode(["x": Double.nan]) == nil)
        #expect(JSONLine.encode(["x": UInt64.max]) == nil)
    }
}
