import Foundation
/// Marker so the target is never empty; real helpers live beside it.
public enum TestSupport {}
