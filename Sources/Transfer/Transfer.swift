@_exported import struct Foundation.URL
@_exported import struct Foundation.Data
