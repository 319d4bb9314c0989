@_exported import struct FoundationEssentials.URL
@_exported import struct FoundationEssentials.Data
