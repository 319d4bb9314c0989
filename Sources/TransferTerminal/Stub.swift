import Transfer
